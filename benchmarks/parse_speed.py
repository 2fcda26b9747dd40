"""CPU time to parse the three real booklets and answer keys; the budget is 1 s for all six.

Run from the repository root: `.venv/bin/python benchmarks/parse_speed.py`. Reads the files
listed in ../shared/oab/manifest.json (beside the repository), never copies them.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from oabench_pipeline.core.answer_key import parse_answer_key  # noqa: E402
from oabench_pipeline.core.booklet import parse_booklet  # noqa: E402

SHARED = REPO_ROOT.parent / "shared" / "oab"
BUDGET_SECONDS = 1.0


def main() -> int:
    """Parse each file once (bytes read beforehand, so only parsing is timed) and print CPU times."""
    manifest = json.loads((SHARED / "manifest.json").read_text(encoding="utf-8"))
    jobs = []
    for entry in manifest["editions"]:
        jobs.append(
            (f"{entry['edition']} booklet", parse_booklet, (SHARED / entry["prova"]["file"]).read_bytes())
        )
        jobs.append(
            (f"{entry['edition']} key", parse_answer_key, (SHARED / entry["gabarito"]["file"]).read_bytes())
        )
    total = 0.0
    for name, parse, data in jobs:
        start = time.process_time()
        parse(data)
        spent = time.process_time() - start
        total += spent
        print(f"{name:<12} {spent * 1000:8.1f} ms CPU")
    print(
        f"{'total':<12} {total * 1000:8.1f} ms CPU  = {total / BUDGET_SECONDS:.0%} of the {BUDGET_SECONDS:.0f} s budget"
    )
    return 0 if total <= BUDGET_SECONDS else 1


if __name__ == "__main__":
    raise SystemExit(main())

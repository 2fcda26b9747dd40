"""CPU time to parse the real booklets and answer keys, each against its budget.

- the 43rd-45th editions' three booklets and three answer keys: 1 s for all six;
- the 30 archived booklets (1st-26th, 28th, 36th-38th): well under 1 s each is the aim (all 33 editions must
  ingest cold within 60 s, downloads and Dagster included), so the budget is 1 s per booklet and
  the figure printed is the mean and the total against it.

Run from the repository root: `.venv/bin/python benchmarks/parse_speed.py`. Reads the files
listed in ../shared/oab/manifest.json and archive-manifest.json (beside the repository), never
copies them.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from oabench_pipeline.core.answer_key import parse_answer_key  # noqa: E402
from oabench_pipeline.core.booklet import parse_booklet  # noqa: E402

SHARED = REPO_ROOT.parent / "shared" / "oab"
BUDGET_SECONDS = 1.0
ARCHIVE_BUDGET_PER_BOOKLET = 1.0


def _timed(name: str, parse: Callable[[bytes], Any], data: bytes) -> float:
    """CPU seconds of one parse (bytes read beforehand, so only parsing is timed), printed."""
    start = time.process_time()
    parse(data)
    spent = time.process_time() - start
    print(f"{name:<16} {spent * 1000:8.1f} ms CPU")
    return spent


def main() -> int:
    manifest = json.loads((SHARED / "manifest.json").read_text(encoding="utf-8"))
    total = 0.0
    for entry in manifest["editions"]:
        total += _timed(
            f"{entry['edition']} booklet", parse_booklet, (SHARED / entry["prova"]["file"]).read_bytes()
        )
        total += _timed(
            f"{entry['edition']} key", parse_answer_key, (SHARED / entry["gabarito"]["file"]).read_bytes()
        )
    print(
        f"{'total':<16} {total * 1000:8.1f} ms CPU  = {total / BUDGET_SECONDS:.0%} of the {BUDGET_SECONDS:.0f} s budget"
    )
    archive = json.loads((SHARED / "archive-manifest.json").read_text(encoding="utf-8"))
    archived = 0.0
    for entry in archive["editions"]:
        data = (SHARED / entry["booklet"]["file"]).read_bytes()
        count = entry["questions"]
        archived += _timed(
            f"{entry['edition']} booklet", lambda pdf, n=count: parse_booklet(pdf, question_count=n), data
        )
    booklets = len(archive["editions"])
    budget = ARCHIVE_BUDGET_PER_BOOKLET * booklets
    print(
        f"{'archive total':<16} {archived * 1000:8.1f} ms CPU for {booklets} booklets "
        f"(mean {archived / booklets * 1000:.0f} ms) = {archived / budget:.0%} of the "
        f"{ARCHIVE_BUDGET_PER_BOOKLET:.0f} s-per-booklet budget"
    )
    return 0 if total <= BUDGET_SECONDS and archived <= budget else 1


if __name__ == "__main__":
    raise SystemExit(main())

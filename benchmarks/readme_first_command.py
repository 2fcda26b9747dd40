"""The README's first command on a fresh clone, install included, against its target (≤ 3 min, issue 33).

Clones this repository's HEAD into a new folder beside it (so that the command's `../shared/oab/mirror` is
the mirror, as for any clone next to `shared`), runs the first line of the README's first code block there
with bash, exactly as written (a fresh venv, the install, the ingest of the 33 editions, the two baselines on
every edition, the leaderboard), prints its wall time against the target with the load average before and
after (a shared machine inflates wall times), and removes the folder. pip's and uv's download caches are
the user's: a first install on a new machine also downloads the wheels.

Run: .venv/bin/python benchmarks/readme_first_command.py [--keep]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 180.0


def first_command(readme: Path) -> str:
    """The first line of the README's first ```bash block."""
    match = re.search(r"```bash\n(.+?)\n", readme.read_text(encoding="utf-8"))
    if match is None:
        raise SystemExit(f"{readme}: no ```bash block")
    return match.group(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="leave the clone in place")
    args = parser.parse_args()
    clone = Path(tempfile.mkdtemp(prefix="readme-first-command-", dir=REPO_ROOT.parent))
    try:
        subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(clone)], check=True)
        command = first_command(clone / "README.md")
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        result = subprocess.run(["bash", "-c", command], cwd=clone, capture_output=True, text=True)
        wall = time.perf_counter() - started
        load_after = os.getloadavg()[0]
        if result.returncode != 0:
            print(result.stdout[-3000:], result.stderr[-3000:], sep="\n", file=sys.stderr)
            raise SystemExit(f"the README's first command exited {result.returncode}")
        print(f"command: {command}")
        print(
            f"wall {wall:.1f} s ({int(wall // 60)} min {wall % 60:.0f} s), target {TARGET_S:.0f} s, "
            f"ratio {wall / TARGET_S:.2f}; load {load_before:.1f} before, {load_after:.1f} after, "
            f"{os.cpu_count()} cores"
        )
    finally:
        if args.keep:
            print(f"clone kept: {clone}")
        else:
            shutil.rmtree(clone, ignore_errors=True)


if __name__ == "__main__":
    main()

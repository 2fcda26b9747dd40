"""What loading our Dagster definitions costs a fresh process, against Dagster's own import.

Every run worker (Dagster's code server spawns a fresh Python per cell run, which imports the job's module,
`oabench_pipeline.definitions`) and every code server `oabench run` starts pays this import. This measures,
for this checkout, the CPU seconds (user + system of the child: what the machine's other work does not
inflate much) of a fresh `python -c "import oabench_pipeline.definitions"` and, as the reference measured in
the same run, of a fresh `python -c "import dagster"`: the two alternate, `--repeats` times each, and the
medians and their ratio are printed. Our chain's own cost is the difference. Run it on two commits to
compare them.

Run: .venv/bin/python benchmarks/definitions_import.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

IMPORTS = {"definitions": "import oabench_pipeline.definitions", "dagster": "import dagster"}


def child_cpu_seconds(code: str) -> float:
    """CPU seconds (user + system) of a fresh `python -c code` run from the checkout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="fresh processes per import (default 7)")
    args = parser.parse_args()
    child_cpu_seconds(IMPORTS["definitions"])  # warm the bytecode cache and the page cache first
    samples: dict[str, list[float]] = {name: [] for name in IMPORTS}
    for _ in range(args.repeats):
        for name, code in IMPORTS.items():  # alternating, so a burst of other work hits both alike
            samples[name].append(child_cpu_seconds(code))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    for name, code in IMPORTS.items():
        spread = f"{min(samples[name]):.2f}-{max(samples[name]):.2f}"
        print(f"{code:40s} {medians[name]:5.2f} CPU-s median of {args.repeats} (range {spread})")
    ours = medians["definitions"] - medians["dagster"]
    print(f"ratio definitions / dagster: {medians['definitions'] / medians['dagster']:.2f}")
    print(f"our chain on top of Dagster: {ours:.2f} CPU-s per process")


if __name__ == "__main__":
    main()

"""Every edition through the user's commands: ingest all 33 cold and as a no-op, then the two offline
baselines over all 33 (66 cells, each a Dagster run in the command's process: a baseline calls no model,
docs/design/launched-cells.md), cold and as a no-op, each against its target (docs/figures.md).

From an empty warehouse and DAGSTER_HOME, runs the real `oabench` CLI (one process per command, as a person
types it) against a loopback server over `../shared/oab/mirror` (the official host's and the archives'
layout: every pinned URL of the 33 editions). Prints each command's wall time with its ratio to the
target, the CPU time it used (user + sys, all threads: what the machine's load cannot inflate), and the
load average before it ran, since a shared machine inflates wall times.

Targets: `oabench ingest` of all 33 editions cold ≤ 60 s, a no-op ingest ≤ 3 s, `oabench run --models
baseline/random,baseline/longest-choice --suite all` ≤ 120 s (issue 33; its no-op is shown beside it, ≤ 3 s).

Run: .venv/bin/python benchmarks/every_edition.py [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from oabench_pipeline_tests.conftest import shared_oab_dir
from oabench_pipeline_tests.servers.static_files import StaticFileServer

OABENCH = str(Path(sys.executable).with_name("oabench"))
BASELINES = "baseline/random,baseline/longest-choice"


@dataclass(frozen=True)
class Step:
    label: str
    args: tuple[str, ...]
    target_s: float
    expect: str  # a line the command must print, so a figure never times a failure


STEPS = (
    Step("oabench ingest (33 editions, cold)", ("ingest",), 60.0, "edition 45: 80 questions"),
    Step("oabench ingest (no-op)", ("ingest",), 3.0, "warehouse:"),
    Step(
        "oabench run baselines --suite all (66 cells, cold)",
        ("run", "--models", BASELINES, "--suite", "all"),
        120.0,
        "66 cell(s) run",
    ),
    Step(
        "oabench run baselines --suite all (no-op)",
        ("run", "--models", BASELINES, "--suite", "all"),
        3.0,
        "up to date",
    ),
)


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_step(step: Step, env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of one `oabench` process; exits with its output if it failed."""
    cpu_before, start = children_cpu_s(), time.perf_counter()
    done = subprocess.run([OABENCH, *step.args], env=env, capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - start, children_cpu_s() - cpu_before
    if done.returncode != 0 or step.expect not in done.stdout + done.stderr:
        raise SystemExit(
            f"`oabench {' '.join(step.args)}` failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
    return wall, cpu


def one_round(mirror_url: str) -> list[tuple[Step, float, float, float]]:
    with tempfile.TemporaryDirectory(prefix="oabench-every-edition-") as tmp:
        root = Path(tmp)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("OABENCH_", "DAGSTER_"))},
            "OABENCH_WAREHOUSE": str(root / "warehouse" / "oabench.duckdb"),
            "DAGSTER_HOME": str(root / "dagster_home"),
            "OABENCH_SOURCE_BASE_URL": mirror_url,
        }
        rows = []
        for step in STEPS:
            load = os.getloadavg()[0]
            wall, cpu = run_step(step, env)
            rows.append((step, wall, cpu, load))
        return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="rounds, each from an empty warehouse")
    repeat = parser.parse_args().repeat
    with StaticFileServer(shared_oab_dir() / "mirror") as mirror:
        rounds = [one_round(mirror.base_url) for _ in range(repeat)]
    print(f"{'step':<52} {'wall s':>7} {'target':>7} {'ratio':>6} {'CPU s':>6} {'load':>5}")
    missed = 0
    for rows in rounds:
        for step, wall, cpu, load in rows:
            ratio = wall / step.target_s
            missed += ratio > 1
            print(f"{step.label:<52} {wall:7.2f} {step.target_s:7.0f} {ratio:6.2f} {cpu:6.1f} {load:5.1f}")
    print("targets met" if not missed else f"{missed} figure(s) over target (see the load column)")


if __name__ == "__main__":
    main()

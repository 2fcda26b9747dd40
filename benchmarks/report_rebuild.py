"""The rebuild every `oabench run` that ran cells ends with: every analysis table and the report, in process.

Builds a small warehouse once (`oabench ingest --editions 43-45` from a loopback mirror of the official host,
then the two baselines on them: 2 keys × 3 editions), then, in a fresh process each (as `oabench run` is):

- `rebuild`: `run_assets(defs, instance, REPORT_ASSETS)` as `cli/run.py` calls it, `--rebuilds` times: the
  first pays the imports a command pays (scipy, matplotlib, ...), the later ones what a process that runs
  several commands pays (the test suite's in-process commands);
- `ours`: our part of it without Dagster, over the same warehouse: the `leaderboard` step's work (the healthy
  reader, `build_leaderboard_tables`, `analysis_checks`, `frame_version` of every table) and the report's
  (`write_reports` into a temporary folder), first and later.

Every figure is CPU seconds of the measuring process (user + system: what the machine's other work does not
inflate much), with wall seconds beside it. Run it on two commits to compare them.

Run: .venv/bin/python benchmarks/report_rebuild.py [--rebuilds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

OABENCH = str(Path(sys.executable).with_name("oabench"))
BASELINES = "baseline/random,baseline/longest-choice"
EDITIONS = "43-45"


def oabench(env: dict[str, str], *args: str) -> None:
    result = subprocess.run([OABENCH, *args], env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"`oabench {' '.join(args)}` failed:\n{result.stdout}\n{result.stderr}")


def timed(work: object) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of `work()`."""
    cpu, wall = time.process_time(), time.perf_counter()
    work()  # type: ignore[operator]
    return time.process_time() - cpu, time.perf_counter() - wall


def measure_rebuilds(rebuilds: int) -> list[tuple[float, float]]:
    """In this process: the rebuild `oabench run` ends with, `rebuilds` times."""
    from oabench_pipeline.cli.common import REPORT_ASSETS
    from oabench_pipeline.definitions import build_definitions
    from oabench_pipeline.engine.runs import instance_for, run_assets
    from oabench_pipeline.settings import Settings

    settings = Settings.from_env()
    defs, instance = build_definitions(settings), instance_for(settings)

    def rebuild() -> None:
        if not run_assets(defs, instance, REPORT_ASSETS).success:
            raise SystemExit("the rebuild failed")

    return [timed(rebuild) for _ in range(rebuilds)]


def measure_ours(rebuilds: int) -> list[dict[str, tuple[float, float]]]:
    """In this process: the `leaderboard` step's and the report's own work, `rebuilds` times."""
    import datetime as dt

    from oabench_pipeline.core.editions import load_suites
    from oabench_pipeline.core.leaderboard import build_leaderboard_tables
    from oabench_pipeline.core.reports import write_reports
    from oabench_pipeline.core.versions import frame_version
    from oabench_pipeline.scoring.analysis import analysis_checks
    from oabench_pipeline.scoring.inputs import healthy_reader
    from oabench_pipeline.settings import Settings
    from oabench_pipeline.warehouse import Warehouse

    settings = Settings.from_env()
    store = Warehouse(settings.warehouse_path)
    suites = list(load_suites(settings.editions_file, settings.discovered_editions_file).values())
    out = Path(tempfile.mkdtemp(prefix="oabench-report-bench-"))
    tables: dict = {}

    def leaderboard() -> None:
        with healthy_reader(store) as (con, _):
            tables.update(build_leaderboard_tables(con, suites=suites))
            row_counts = con.sql(
                "select model_key, edition, run_id, count(*) filter (where status <> 'unresolved') as n "
                "from scores group by all"
            ).pl()
            answered_at = con.sql(
                "select model_key, min(created_at) as first_answer from inferences "
                "where source = 'live' group by all"
            ).pl()
        analysis_checks(tables, row_counts, answered_at)
        for frame in tables.values():
            frame_version(frame)

    def report() -> None:
        write_reports(
            tables,
            out,
            data_as_of=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
            editions=store.read("editions"),
            answer_keys=store.read("answer_keys"),
        )

    return [{"leaderboard": timed(leaderboard), "report": timed(report)} for _ in range(rebuilds)]


def child(what: str, rebuilds: int) -> None:
    figures = measure_rebuilds(rebuilds) if what == "rebuild" else measure_ours(rebuilds)
    print(json.dumps(figures))


def in_fresh_process(env: dict[str, str], what: str, rebuilds: int) -> list:
    result = subprocess.run(
        [sys.executable, __file__, "--child", what, "--rebuilds", str(rebuilds)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"measuring {what} failed:\n{result.stdout}\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def figure(cpu_wall: tuple[float, float]) -> str:
    return f"{cpu_wall[0]:5.2f} CPU-s ({cpu_wall[1]:5.2f} s wall)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rebuilds", type=int, default=3, help="rebuilds per process (the first pays imports)"
    )
    parser.add_argument("--child", choices=["rebuild", "ours"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.rebuilds)
        return
    from oabench_pipeline_tests.conftest import shared_oab_dir
    from oabench_pipeline_tests.servers.static_files import StaticFileServer

    with (
        tempfile.TemporaryDirectory(prefix="oabench-rebuild-") as tmp,
        StaticFileServer(shared_oab_dir() / "mirror") as mirror,
    ):
        root = Path(tmp)
        env = {
            **os.environ,
            "OABENCH_WAREHOUSE": str(root / "warehouse" / "oabench.duckdb"),
            "DAGSTER_HOME": str(root / "dagster_home"),
            "OABENCH_SOURCE_BASE_URL": mirror.base_url,
        }
        oabench(env, "ingest", "--editions", EDITIONS)
        oabench(env, "run", "--models", BASELINES, "--editions", EDITIONS)
        rebuilds = in_fresh_process(env, "rebuild", args.rebuilds)
        ours = in_fresh_process(env, "ours", args.rebuilds)
    print(f"warehouse: 2 baselines × editions {EDITIONS}; load average {os.getloadavg()[0]:.1f}")
    print("\nrebuild (run_assets(defs, instance, REPORT_ASSETS), Dagster included)")
    for i, cpu_wall in enumerate(rebuilds):
        print(f"  {'first (a command: imports)' if i == 0 else f'later #{i}':<28} {figure(cpu_wall)}")
    print("\nour part (no Dagster)")
    for i, parts in enumerate(ours):
        label = "first" if i == 0 else f"later #{i}"
        print(
            f"  {label:<10} leaderboard step {figure(parts['leaderboard'])}   report {figure(parts['report'])}"
        )


if __name__ == "__main__":
    main()

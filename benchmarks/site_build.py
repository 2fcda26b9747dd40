"""Site build time through `oabench site`, against the 20 s target (issue 21), on two warehouses:

- `published`: the README's main command (ingest the mirror's editions, the two baselines) plus
  `oabench import` of the published runs in `../shared/oab`, as a person builds it;
- `synthetic`: `--keys` model keys × `--editions` editions × 80 questions of seeded synthetic answers,
  scored and ranked (29 × 80 = 2,320 questions: the archive's size; its first three editions have 100).

For each: the first build (every file written), a rebuild with nothing changed (nothing written), and
a rebuild after one new cell (a new key answering one edition: only the pages it changes written).
Every time is a whole `oabench site` process, Dagster run included, printed with its ratio to the target.

Run: .venv/bin/python benchmarks/site_build.py [--only published|synthetic] [--keys 15] [--editions 29]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from oabench_pipeline.core.scoring import score_inferences  # noqa: E402
from oabench_pipeline.warehouse import Warehouse  # noqa: E402
from oabench_pipeline_tests.core.synthetic_results import (  # noqa: E402
    make_synthetic_warehouse,
    rebuild_tables,
    stored_suites,
    write_scored_warehouse,
)

TARGET_S = 20.0
SHARED = Path(os.environ.get("OABENCH_SHARED_DIR", REPO_ROOT.parent / "shared")) / "oab"
OABENCH = Path(sys.executable).with_name("oabench")
NEW_KEY = "bench/new-model"


def oabench(env: dict[str, str], *args: str) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system: what the machine's other work does not inflate) and output."""
    cpu_before = _children_cpu()
    started = time.perf_counter()
    result = subprocess.run(
        [str(OABENCH), *args], cwd=REPO_ROOT, env={**os.environ, **env}, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"oabench {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return seconds, _children_cpu() - cpu_before, result.stdout


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def environment(work: Path) -> dict[str, str]:
    return {
        "OABENCH_WAREHOUSE": str(work / "warehouse" / "oabench.duckdb"),
        "DAGSTER_HOME": str(work / "dagster_home"),
        "OABENCH_SOURCE_BASE_URL": str(SHARED / "mirror"),
        "OABENCH_LOG_LEVEL": "ERROR",
        "OABENCH_AUTOMATION": "off",
    }


def add_one_cell(store: Warehouse) -> None:
    """A new key answering the first edition (a copy of the first key's answers, an hour later)."""
    inferences = store.read("inferences")
    first_key, first_edition = inferences["model_key"][0], inferences["edition"].min()
    cell = inferences.filter((pl.col("model_key") == first_key) & (pl.col("edition") == first_edition))
    cell = cell.with_columns(
        model_key=pl.lit(NEW_KEY),
        model=pl.lit(NEW_KEY),
        run_id=pl.lit("bench-new-run"),
        source=pl.lit("live"),
        created_at=pl.col("created_at").max() + dt.timedelta(hours=1),
    )
    partition = f"{first_edition}|{NEW_KEY}"  # a cell's partition key: edition|model key
    store.write_partition("inferences", cell, partition)
    with store.reader() as con:  # that cell scored, as `oabench run` scores a new cell
        store.write_partition(
            "scores", score_inferences(con, model_key=NEW_KEY, edition=first_edition), partition
        )
    # Ranked over the suites the warehouse was ranked over: rebuilt over `all` alone, the index page would
    # switch suites and every suite page go, which is not what one new cell does.
    rebuild_tables(store, stored_suites(store))


def measure(name: str, env: dict[str, str]) -> None:
    store = Warehouse(Path(env["OABENCH_WAREHOUSE"]))
    questions = store.read("questions").height
    keys = store.read("leaderboard").height
    print(f"{name}: {questions:,} questions × {keys} model keys", flush=True)
    for step in ("first build", "rebuild, nothing changed", "rebuild after one new cell"):
        if step == "rebuild after one new cell":
            add_one_cell(store)
        load_before = os.getloadavg()[0]
        seconds, cpu, output = oabench(env, "site")
        summary = re.search(r"site: .*", output)
        # The 1-minute load average before and after: on a shared machine the wall time is only read with it.
        print(
            f"  {step}: {seconds:.1f} s = {seconds / TARGET_S:.2f} × the {TARGET_S:.0f} s target "
            f"(CPU {cpu:.1f} s = {cpu / TARGET_S:.2f} ×; load average {load_before:.1f} → "
            f"{os.getloadavg()[0]:.1f})  [{summary.group(0) if summary else output.strip()}]",
            flush=True,
        )


def published(work: Path) -> dict[str, str]:
    env = environment(work)
    for step in (
        ["ingest"],
        ["run", "--models", "baseline/random,baseline/longest-choice", "--suite", "all"],
        ["import", str(SHARED / "published-runs")],
    ):
        oabench(env, *step)
    return env


def synthetic(work: Path, keys: int, editions: int) -> dict[str, str]:
    env = environment(work)
    tables = make_synthetic_warehouse(n_models=keys, n_editions=editions, seed=1).tables
    write_scored_warehouse(tables, Path(env["OABENCH_WAREHOUSE"]))
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["published", "synthetic"])
    parser.add_argument("--keys", type=int, default=15)
    parser.add_argument("--editions", type=int, default=29)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="oabench-site-bench-") as tmp:
        if args.only in (None, "published"):
            measure("published runs + baselines", published(Path(tmp) / "published"))
        if args.only in (None, "synthetic"):
            measure("synthetic", synthetic(Path(tmp) / "synthetic", args.keys, args.editions))


if __name__ == "__main__":
    main()

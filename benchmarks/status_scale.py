"""Scale benchmark: `oabench status` and a no-op `oabench run` over 60 model keys × 33 editions (1,980 cells).

Builds, in a temporary folder, what 60 API models run on every edition leave behind: the 33 editions ingested
by `oabench ingest` (from a loopback server over `../shared/oab/mirror`), then for each cell the response log,
the `inferences` partition and the `scores` partition written as the cell's run writes them (the same
functions: `build_requests`, `ResponseLog`, `api_cell_rows`, `score_inferences`, `Warehouse.write_partition`
with the data versions it records), and in the Dagster instance the partitions, one SUCCESS run per cell with
its partition tags and the materializations of both assets (`DagsterInstance.add_run`,
`report_runless_asset_event`). One `oabench run` then builds the leaderboard over all of them (every cell is
up to date: none is run). Then it times, as a person types them (one process each):

- `oabench status` (every cell: 1,980 complete, exit code 0), target ≤ 10 s;
- `oabench run --models <the 60 keys> --suite all` with nothing to do ("up to date"), target ≤ 10 s;

each beside its reference measured in the same run: the same command on one cell (`--models <one key>
--editions 45`), i.e. a process's start-up and fixed work, so (full − one cell) ÷ 1,979 is the cost per cell.
Prints wall and CPU seconds (user + sys of the process: what a loaded machine cannot inflate) and the ratio of
the wall time to the target.

Run: .venv/bin/python benchmarks/status_scale.py [--models 60] [--repeat 3] [--keep DIR]
(`--keep DIR` builds there once and reuses it on the next run: to profile, e.g. `py-spy record -- oabench status`
with the environment it prints.)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from oabench_pipeline.core.models_registry import load_models_registry
from oabench_pipeline.core.runs import live_run_id
from oabench_pipeline.core.scoring import SCORING_VERSION, score_inferences
from oabench_pipeline.core.tables import conform
from oabench_pipeline.core.versions import INFERENCE_BOOKKEEPING_COLUMNS, frame_version
from oabench_pipeline.inference.cell import api_cell_rows, build_requests, cell_name, plan_cell
from oabench_pipeline.inference.response_log import ResponseLog, cell_log_path
from oabench_pipeline.inference.types import ChatResult
from oabench_pipeline.warehouse import Warehouse, views_refreshed_once
from oabench_pipeline_tests.conftest import shared_oab_dir
from oabench_pipeline_tests.pipeline_env import write_models_file
from oabench_pipeline_tests.servers.static_files import StaticFileServer

OABENCH = str(Path(sys.executable).with_name("oabench"))
TARGET_S = 10.0
BUILT_MARKER = "built.json"


def environment(root: Path, mirror_url: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OABENCH_", "DAGSTER_"))}
    env |= {
        "OABENCH_WAREHOUSE": str(root / "warehouse" / "oabench.duckdb"),
        "DAGSTER_HOME": str(root / "dagster_home"),
        "OABENCH_MODELS_FILE": str(root / "models.toml"),
        "OABENCH_PACKAGED_MODELS": "off",  # the 60 keys are the registry
    }
    if mirror_url:
        env["OABENCH_SOURCE_BASE_URL"] = mirror_url
    return env


def oabench(env: dict[str, str], *args: str, expect_code: int = 0) -> tuple[float, float, str]:
    """(wall s, CPU s, output) of one `oabench` process; exits with its output if it did not end as expected."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([OABENCH, *args], env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if done.returncode != expect_code:
        raise SystemExit(
            f"`oabench {' '.join(args)}` exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
    return wall, cpu, done.stdout + done.stderr


def model_keys(count: int) -> list[str]:
    return [f"synthetic/model-{i:02d}" for i in range(1, count + 1)]


def write_cell(store: Warehouse, model_key: str, edition: str, questions: pl.DataFrame, models: dict) -> None:
    """The response log and both partitions a complete run of the cell leaves (as `inferences` and `scores`
    write them, with the data versions they record)."""
    model = models[model_key]
    run_id = live_run_id(model_key, 1)
    finished = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    results = [
        ChatResult(r.qid, r.request_hash, "Resposta: A", None, 900, 500, 3, 0, 1e-5, None, 1, finished)
        for r in build_requests(model, questions)
    ]
    with ResponseLog(cell_log_path(store.root / "responses", model_key, edition)) as log:
        for result in results:
            log.append(result)
    logged = {r.request_hash: r for r in results}
    plan = plan_cell(model, questions, logged, pl.DataFrame())
    rows = api_cell_rows(model, questions, plan, logged, run_id)
    for row in rows:
        row["dagster_run_id"] = f"synthetic-{edition}"
    cell = cell_name(model_key, edition)
    frame = conform("inferences", pl.DataFrame(rows, infer_schema_length=None))
    inputs = store.input_versions({"questions": edition})
    version = frame_version(frame, INFERENCE_BOOKKEEPING_COLUMNS)
    store.write_partition("inferences", frame, cell, data_version=version, inputs=inputs)
    cell_inputs = {"inferences": cell, "questions": edition, "answer_keys": edition}
    inputs = store.input_versions(cell_inputs)
    with store.partitions_reader(cell_inputs) as con:
        scores = score_inferences(con, model_key=model_key, edition=int(edition))
    store.write_partition(
        "scores", scores, cell, version=SCORING_VERSION, data_version=frame_version(scores), inputs=inputs
    )


def record_runs(env: dict[str, str], keys: list[str], editions: list[str]) -> None:
    """The instance a run of every cell leaves: partitions, a SUCCESS run per cell, both materializations."""
    os.environ["DAGSTER_HOME"] = env["DAGSTER_HOME"]
    from dagster import AssetMaterialization, DagsterInstance, DagsterRun, DagsterRunStatus, MultiPartitionKey

    with DagsterInstance.get() as instance:
        instance.add_dynamic_partitions("editions", editions)
        instance.add_dynamic_partitions("model_keys", keys)
        for key in keys:
            for edition in editions:
                partition = MultiPartitionKey({"edition": edition, "model": key})
                tags = {
                    "dagster/partition": str(partition),
                    "dagster/partition/edition": edition,
                    "dagster/partition/model": key,
                }
                instance.add_run(
                    DagsterRun(job_name="oabench_cell", status=DagsterRunStatus.SUCCESS, tags=tags)
                )
                for asset in ("inferences", "scores"):
                    instance.report_runless_asset_event(AssetMaterialization(asset, partition=partition))


def build(root: Path, count: int) -> list[str]:
    """Everything the timed commands read; the model keys."""
    keys = model_keys(count)
    if (root / BUILT_MARKER).is_file():
        return json.loads((root / BUILT_MARKER).read_text())["keys"]
    root.mkdir(parents=True, exist_ok=True)
    entries = [{"id": key, "base_url": "http://127.0.0.1:9/v1", "api_key_env": ""} for key in keys]
    write_models_file(root / "models.toml", entries)
    with StaticFileServer(shared_oab_dir() / "mirror") as mirror:
        wall, _, _ = oabench(environment(root, mirror.base_url), "ingest")
    print(f"setup: oabench ingest (33 editions) {wall:.0f} s", flush=True)
    env = environment(root)
    store = Warehouse(Path(env["OABENCH_WAREHOUSE"]))
    editions = sorted(store.partitions("questions"), key=int)
    models = {m.key: m for m in load_models_registry(root / "models.toml")}
    start = time.perf_counter()
    with views_refreshed_once():
        for edition in editions:
            questions = store.read("questions", edition)
            for key in keys:
                write_cell(store, key, edition, questions, models)
    print(f"setup: {len(keys) * len(editions)} cells written {time.perf_counter() - start:.0f} s", flush=True)
    start = time.perf_counter()
    record_runs(env, keys, editions)
    print(f"setup: run storage {time.perf_counter() - start:.0f} s", flush=True)
    wall, _, _ = oabench(env, "run", "--models", ",".join(keys), "--suite", "all")
    print(f"setup: oabench run (leaderboard over every cell, no cell run) {wall:.0f} s", flush=True)
    (root / BUILT_MARKER).write_text(json.dumps({"keys": keys}))
    return keys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=60, help="model keys (× 33 editions)")
    parser.add_argument("--repeat", type=int, default=3, help="timings of each command (best is kept)")
    parser.add_argument("--keep", type=Path, help="build in this folder, or reuse what an earlier run built")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="oabench-status-scale-") as tmp:
        root = args.keep.resolve() if args.keep else Path(tmp)
        keys = build(root, args.models)
        env = environment(root)
        print(
            "environment: " + " ".join(f"{k}={env[k]}" for k in sorted(env) if k.startswith(("OAB", "DAG")))
        )
        cells = len(keys) * 33
        commands = {
            "oabench status": (("status",), ("status", "--models", keys[0], "--editions", "45")),
            "oabench run (no-op)": (
                ("run", "--models", ",".join(keys), "--suite", "all"),
                ("run", "--models", keys[0], "--editions", "45"),
            ),
        }
        print(
            f"{'command':<22} {'cells':>6} {'wall s':>7} {'CPU s':>6} {'target':>6} {'ratio':>6} {'load':>5}"
        )
        for label, (full, one) in commands.items():
            for args_, count in ((one, 1), (full, cells)):
                load = os.getloadavg()[0]
                best = min((oabench(env, *args_) for _ in range(args.repeat)), key=lambda t: t[0])
                if "status" in args_ and f"{count} complete" not in best[2]:
                    raise SystemExit(f"not every cell is complete:\n{best[2][-2000:]}")
                if "run" in args_ and "up to date" not in best[2]:
                    raise SystemExit(f"the run was not a no-op:\n{best[2][-2000:]}")
                ratio = best[0] / TARGET_S
                print(
                    f"{label:<22} {count:6d} {best[0]:7.2f} {best[1]:6.2f} {TARGET_S:6.0f} {ratio:6.2f} {load:5.1f}"
                )


if __name__ == "__main__":
    main()

"""A whole matrix of cells (M models × 3 editions) through `oabench run`: does it take the slowest model's time?

Each model's answers are the published OABench answers of `../shared/oab/published-runs`, replayed by the
loopback server with each answer's recorded latency scaled down (`--scale`, default a tenth): real,
heavy-tailed latencies (DeepSeek's slowest call took 217 s, Gemini Flash Lite's median 0.8 s).

reference = the slowest model's makespan with its pool of `concurrency` kept full from the first request,
simulated on the same latencies in the order the server received them; efficiency = reference ÷ (first
request → last response), both seen by the server. The server runs in this process, `oabench run` in its
own (the user's path: a fresh interpreter, the CLI, its Dagster runs), so neither shares a GIL with the
other. Also checked: every question answered, none paid twice.

Scenarios (`--scenarios`):
- `matrix`: the 4 complete published models × 3 editions, `--concurrency` 20 each (target ≥ 0.85);
- `one`: one model × 3 editions at a fixed 200 ms per call (target ≥ 0.95). Measured next to it, on a
  fresh server and slot folder: the same requests sent by the model client alone, one plain process per
  edition (`benchmarks/client_floor.py`: no Dagster, no run, no response log). Its efficiency is what the
  request path itself reaches on this machine; the pipeline's ÷ it is what the engine costs.

`--ui-backfill`: after each `matrix` measurement, the same cells again as a person launches them from the UI:
`dagster-webserver` and `dagster-daemon` on 127.0.0.1 over a fresh DAGSTER_HOME and warehouse (its
`dagster.yaml` is the one `oabench` writes for a new instance: the queued run coordinator and default limits),
`oabench ingest` from the mirror, the model keys added as partitions, then GraphQL `launchPartitionBackfill`
of `inferences` and `scores` over the 4 × 3 cells (asset selection + partition names, no tags, as the UI
sends it). Printed: backfill wall (launch → last cell run ended) ÷ the `oabench run` wall just measured
(target ≤ 1.5), with the replay server's figures for the backfill.

    .venv/bin/python benchmarks/matrix.py [--scale 0.1] [--concurrency 20] [--scenarios matrix,one] [--repeat 1]
        [--ui-backfill]
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks.client_floor import client_floor  # noqa: E402
from oabench_pipeline.shared.partitions import cell_partition_key  # noqa: E402
from oabench_pipeline.warehouse import Warehouse  # noqa: E402
from oabench_pipeline_tests.conftest import shared_oab_dir  # noqa: E402
from oabench_pipeline_tests.inference.replay import TEST_KEY, TEST_KEY_ENV, question_texts  # noqa: E402
from oabench_pipeline_tests.pipeline_env import copy_ingested, write_models_file  # noqa: E402
from oabench_pipeline_tests.servers.dagster_webserver import (  # noqa: E402
    ADD_PARTITION,
    BACKFILL_RUNS,
    LAUNCH_BACKFILL,
    TERMINAL,
    DagsterWebserver,
    dagster_daemon,
)
from oabench_pipeline_tests.servers.openai_replay import (  # noqa: E402
    RecordedReply,
    ReplayServer,
    ServerStats,
    prompt_key,
)

OABENCH = REPO_ROOT / ".venv" / "bin" / "oabench"
# The published runs that answered all three editions (the GPT-5 Mini run was aborted after 24 lines).
MATRIX_MODELS = (
    "google/gemini-2.5-flash-lite",
    "anthropic/claude-haiku-4.5",
    "deepseek/deepseek-v3.2",
    "x-ai/grok-4.1-fast",
)
ONE_MODEL = "anthropic/claude-haiku-4.5"
EDITIONS = ("43", "44", "45")  # the default suite, which `oabench run` answers when given no editions
TARGETS = {"matrix": 0.85, "one": 0.95}
BACKFILL_TARGET = 1.5  # backfill wall ÷ `oabench run` wall
BACKFILL_TIMEOUT_S = 1200


@dataclass(frozen=True)
class Result:
    scenario: str
    models: int
    reference_s: float
    elapsed_s: float
    wall_s: float
    answered: int
    expected: int
    duplicate_paid: int
    max_in_flight: int
    exit_code: int
    client_floor: float | None = None  # the client alone on the same requests (`one`), its efficiency

    @property
    def efficiency(self) -> float:
        return self.reference_s / self.elapsed_s if self.elapsed_s else 0.0


def pool_makespan(latencies: Sequence[float], concurrency: int) -> float:
    """When the last of `latencies` ends if each starts the moment one of `concurrency` slots frees up."""
    slots: list[float] = [0.0] * min(concurrency, max(1, len(latencies)))
    for latency in latencies:
        start = heapq.heappop(slots)
        heapq.heappush(slots, start + latency)
    return max(slots)


def recorded_replies(
    texts: dict[str, str], models: Sequence[str], scale: float, fixed_latency_s: float | None
) -> dict[tuple[str, str], RecordedReply]:
    """Each model's published answers keyed as the server looks them up, with latency_s set."""
    replies = {}
    for folder in sorted((shared_oab_dir() / "published-runs").iterdir()):
        rows: dict[str, dict] = {}
        for line in (folder / "inferences.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                rows[row["qid"]] = row  # a resumed run appends: the last line wins
        for qid, row in rows.items():
            if row["model"] not in models or row.get("skipped") or qid not in texts:
                continue
            usage = row.get("tokenUsage") or {}
            latency = fixed_latency_s if fixed_latency_s is not None else row["latencyMs"] / 1000 * scale
            replies[(row["model"], texts[qid])] = RecordedReply(
                raw_response=row.get("rawResponse") or "A",
                prompt_tokens=usage.get("promptTokens"),
                completion_tokens=usage.get("completionTokens"),
                cost=row.get("cost"),
                latency_s=latency,
            )
    return replies


def oabench(env: dict[str, str], *args: str) -> tuple[int, float, str]:
    started = time.perf_counter()
    done = subprocess.run([str(OABENCH), *args], env=env, capture_output=True, text=True, cwd=REPO_ROOT)
    return done.returncode, time.perf_counter() - started, done.stdout + done.stderr


def base_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OABENCH_", "DAGSTER_"))}
    env.update(
        {
            "OABENCH_WAREHOUSE": str(root / "warehouse" / "oabench.duckdb"),
            "DAGSTER_HOME": str(root / "dagster_home"),
            "OABENCH_SOURCE_BASE_URL": str(shared_oab_dir() / "mirror"),
            TEST_KEY_ENV: TEST_KEY,
        }
    )
    return env


def measure(
    scenario: str,
    models: Sequence[str],
    template: Path,
    root: Path,
    concurrency: int,
    scale: float,
    fixed_latency_s: float | None,
) -> Result:
    env = base_env(root)
    warehouse = Warehouse(Path(env["OABENCH_WAREHOUSE"]))
    copy_ingested(template, warehouse.root)
    texts = question_texts(warehouse)
    replies = recorded_replies(texts, models, scale, fixed_latency_s)
    latency_of = {prompt_key(model, text): reply.latency_s or 0.0 for (model, text), reply in replies.items()}
    with ReplayServer(replies=replies, api_key=TEST_KEY) as server:
        entries = [
            {"id": m, "base_url": server.base_url, "api_key_env": TEST_KEY_ENV, "concurrency": concurrency}
            for m in models
        ]
        env["OABENCH_MODELS_FILE"] = str(write_models_file(root / "models.toml", entries))
        exit_code, wall, output = oabench(env, "run", "--models", ",".join(models))
        stats = server.stats
    if exit_code != 0:
        print(output[-3000:], file=sys.stderr)
    reference, elapsed = pool_figures(stats, latency_of, models, concurrency)
    floor = None
    if scenario == "one":
        with ReplayServer(replies=replies, api_key=TEST_KEY) as server:
            models_file = write_models_file(
                root / "client-floor-models.toml", [{**entries[0], "base_url": server.base_url}]
            )
            floor_answered = client_floor(env, warehouse.root, EDITIONS, models_file, root, concurrency)
            floor_stats = server.stats
        floor_reference, floor_elapsed = pool_figures(floor_stats, latency_of, models, concurrency)
        if floor_answered != 238 or not floor_elapsed:
            raise SystemExit(f"the client alone answered {floor_answered}/238")
        floor = floor_reference / floor_elapsed
    answered = len(warehouse.query("select 1 from inferences where not skipped and error is null"))
    return Result(
        scenario=scenario,
        models=len(models),
        reference_s=reference,
        elapsed_s=elapsed,
        wall_s=wall,
        answered=answered,
        expected=238 * len(models),
        duplicate_paid=len(stats.duplicate_answers),
        max_in_flight=stats.max_in_flight,
        exit_code=exit_code,
        client_floor=floor,
    )


def pool_figures(
    stats: ServerStats, latency_of: dict[tuple[str, str], float], models: Sequence[str], concurrency: int
) -> tuple[float, float]:
    """(reference, first request → last response): the reference is the slowest model's pool makespan
    on the server's arrival order."""
    reference = max(
        pool_makespan([latency_of[key] for key in stats.arrival_order if key[0] == model], concurrency)
        for model in models
    )
    elapsed = (
        stats.last_response_at - stats.first_request_at
        if stats.first_request_at is not None and stats.last_response_at is not None
        else 0.0
    )
    return reference, elapsed


@dataclass(frozen=True)
class BackfillResult:
    models: int
    wall_s: float
    cli_wall_s: float
    first_start_s: float  # launch → the first cell run started (the daemon's backfill and queue ticks)
    last_start_s: float
    runs_succeeded: int
    runs: int
    answered: int
    expected: int
    requests: int
    duplicate_paid: int
    max_in_flight: int


def measure_backfill(
    models: Sequence[str], root: Path, concurrency: int, scale: float, cli_wall_s: float
) -> BackfillResult:
    """The matrix's cells as a UI backfill on a fresh instance; wall = launch → the last cell run's end."""
    env = {**base_env(root), "OABENCH_AUTOMATION": "off"}  # only the backfill's runs: no table rebuilds
    exit_code, _, output = oabench(env, "ingest")  # writes the new instance's dagster.yaml, as for a new user
    if exit_code != 0:
        raise SystemExit(f"ingest failed:\n{output[-2000:]}")
    warehouse = Warehouse(Path(env["OABENCH_WAREHOUSE"]))
    replies = recorded_replies(question_texts(warehouse), models, scale, None)
    home = Path(env["DAGSTER_HOME"])
    with ReplayServer(replies=replies, api_key=TEST_KEY) as server:
        entries = [
            {"id": m, "base_url": server.base_url, "api_key_env": TEST_KEY_ENV, "concurrency": concurrency}
            for m in models
        ]
        env["OABENCH_MODELS_FILE"] = str(write_models_file(root / "models.toml", entries))
        with DagsterWebserver(home, env) as web, dagster_daemon(home, {**os.environ, **env}):
            for model in models:  # "Add partition" in the launch dialog
                added = web.query(ADD_PARTITION, {"repo": web.repository_selector(), "key": model})
                assert added["addDynamicPartition"]["__typename"] == "AddDynamicPartitionSuccess", added
            cells = [str(cell_partition_key(m, e)) for m in models for e in EDITIONS]
            params = {
                "partitionNames": cells,
                "assetSelection": [{"path": ["inferences"]}, {"path": ["scores"]}],
                "fromFailure": False,
                "tags": [],
            }
            launched_at = time.time()
            launched = web.query(LAUNCH_BACKFILL, {"params": params})["launchPartitionBackfill"]
            assert launched["__typename"] == "LaunchBackfillSuccess", launched
            runs: list[dict] = []
            while time.time() - launched_at < BACKFILL_TIMEOUT_S:
                runs = web.query(BACKFILL_RUNS, {"id": launched["backfillId"]})["runsOrError"]["results"]
                if len(runs) >= len(cells) and all(r["status"] in TERMINAL for r in runs):
                    break
                time.sleep(0.5)
            else:
                raise TimeoutError(f"backfill not done after {BACKFILL_TIMEOUT_S} s: {runs}")
        stats = server.stats
    answered = len(warehouse.query("select 1 from inferences where not skipped and error is null"))
    return BackfillResult(
        models=len(models),
        wall_s=max(r["endTime"] for r in runs) - launched_at,
        cli_wall_s=cli_wall_s,
        first_start_s=min(r["startTime"] for r in runs) - launched_at,
        last_start_s=max(r["startTime"] for r in runs) - launched_at,
        runs_succeeded=sum(r["status"] == "SUCCESS" for r in runs),
        runs=len(runs),
        answered=answered,
        expected=238 * len(models),
        requests=stats.total_requests,
        duplicate_paid=len(stats.duplicate_answers),
        max_in_flight=stats.max_in_flight,
    )


def ingest_template(root: Path) -> Path:
    exit_code, _, output = oabench(base_env(root), "ingest")
    if exit_code != 0:
        raise SystemExit(f"ingest failed:\n{output[-2000:]}")
    return root / "warehouse"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", type=float, default=0.1, help="recorded latency × this")
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--scenarios", default="matrix,one")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--ui-backfill", action="store_true", help="also each matrix as a UI backfill")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="oabench-matrix-") as tmp:
        template = ingest_template(Path(tmp) / "template")
        results = []
        backfills = []
        for scenario in args.scenarios.split(","):
            models = MATRIX_MODELS if scenario == "matrix" else (ONE_MODEL,)
            fixed = 0.2 if scenario == "one" else None
            for attempt in range(args.repeat):
                root = Path(tmp) / f"{scenario}-{attempt}"
                results.append(measure(scenario, models, template, root, args.concurrency, args.scale, fixed))
                shutil.rmtree(root, ignore_errors=True)
                if args.ui_backfill and scenario == "matrix":
                    root = Path(tmp) / f"backfill-{attempt}"
                    cli_wall = results[-1].wall_s
                    backfills.append(measure_backfill(models, root, args.concurrency, args.scale, cli_wall))
                    shutil.rmtree(root, ignore_errors=True)
                print(f"{scenario} {attempt + 1}/{args.repeat}: done", file=sys.stderr, flush=True)
    print(f"load average: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} cores")
    print(
        "| scenario | models × editions | reference | first request → last response | efficiency | target "
        "| wall (oabench run) | answered | paid twice | max in flight | exit | client alone | ÷ client alone |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        floor = f"{r.client_floor:.3f} | {r.efficiency / r.client_floor:.3f}" if r.client_floor else "– | –"
        print(
            f"| {r.scenario} | {r.models} × 3 | {r.reference_s:.2f} s | {r.elapsed_s:.2f} s | "
            f"{r.efficiency:.3f} | ≥ {TARGETS[r.scenario]} | {r.wall_s:.1f} s | {r.answered}/{r.expected} | "
            f"{r.duplicate_paid} | {r.max_in_flight} | {r.exit_code} | {floor} |"
        )
    if backfills:
        print(
            "\n| UI backfill | launch → last run ended | ÷ oabench run wall | target | runs started | runs ok | answered "
            "| requests | paid twice | max in flight |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
    for b in backfills:
        print(
            f"| {b.models} × 3 | {b.wall_s:.1f} s | {b.wall_s / b.cli_wall_s:.2f} ({b.cli_wall_s:.1f} s) | "
            f"≤ {BACKFILL_TARGET} | {b.first_start_s:.1f}–{b.last_start_s:.1f} s | {b.runs_succeeded}/{b.runs} | {b.answered}/{b.expected} | {b.requests} | "
            f"{b.duplicate_paid} | {b.max_in_flight} |"
        )


if __name__ == "__main__":
    main()

"""`oabench run` (3 editions × 3 replayed models) under each fault profile: is every question answered once?

For each profile of `oabench_pipeline_tests/inference/fault_profiles.py` a fresh warehouse (the three
editions ingested once from `../shared/oab/mirror`) runs the full pipeline in-process against the loopback
replay server, which replays the published answers of deepseek, grok and haiku with small latency. Columns:

- answered: active questions with an answer after the run (and after one rerun, if the run left error rows)
- error rows: error rows the first run left (the rerun's count follows the arrow)
- dup. paid: prompts the server answered successfully more than once (must be 0)
- retries: HTTP requests beyond one per question (429s, 5xx, timeouts, drops, malformed bodies)
- wall: wall time of the first run, relative to the fault-free profile

    .venv/bin/python benchmarks/reliability.py [--latency-s 0.01] [--profiles none,combined]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from click.testing import CliRunner  # noqa: E402

from oabench_pipeline.cli import main as oabench  # noqa: E402
from oabench_pipeline.warehouse import Warehouse  # noqa: E402
from oabench_pipeline_tests.conftest import shared_oab_dir  # noqa: E402
from oabench_pipeline_tests.inference.fault_profiles import (  # noqa: E402
    CLIENT_TIMEOUT_S,
    PROFILES,
    concurrency_for,
    latency_for,
)
from oabench_pipeline_tests.inference.paid_calls import error_rows  # noqa: E402
from oabench_pipeline_tests.inference.replay import (  # noqa: E402
    REPLAYED,
    TEST_KEY,
    TEST_KEY_ENV,
    published_replies,
)
from oabench_pipeline_tests.pipeline_env import copy_ingested, write_models_file  # noqa: E402
from oabench_pipeline_tests.servers.openai_replay import FaultProfile, ReplayServer  # noqa: E402

MODELS = list(REPLAYED)
ACTIVE_PER_MODEL = 238


@dataclass(frozen=True)
class Row:
    profile: str
    answered: int
    errors_first: int
    errors_after_rerun: int
    duplicate_paid: int
    retries: int
    faults: int
    wall_s: float
    exit_code: int


def cli(env: dict[str, str], *args: str) -> int:
    result = CliRunner().invoke(oabench, list(args), env=env, catch_exceptions=False)
    if result.exit_code != 0:
        print(result.output[-2000:], file=sys.stderr)
    return result.exit_code


def base_env(root: Path) -> dict[str, str]:
    return {
        "OABENCH_WAREHOUSE": str(root / "warehouse" / "oabench.duckdb"),
        "DAGSTER_HOME": str(root / "dagster_home"),
        "OABENCH_SOURCE_BASE_URL": str(shared_oab_dir() / "mirror"),
        "OABENCH_MODEL_TIMEOUT_S": str(CLIENT_TIMEOUT_S),
        TEST_KEY_ENV: TEST_KEY,
    }


def ingest_template(root: Path) -> Path:
    env = base_env(root)
    if cli(env, "ingest") != 0:
        raise SystemExit("ingest failed")
    return root / "warehouse"


def measure(name: str, profile: FaultProfile, template: Path, root: Path, latency_s: float) -> Row:
    env = base_env(root)
    warehouse = Warehouse(Path(env["OABENCH_WAREHOUSE"]))
    copy_ingested(template, warehouse.root)
    replies = published_replies(shared_oab_dir(), warehouse)
    args = ["run", "--models", ",".join(MODELS), "--concurrency", str(concurrency_for(profile))]
    latency = latency_for(profile, latency_s)
    with ReplayServer(replies=replies, api_key=TEST_KEY, latency_s=latency, faults=profile) as server:
        entries = [{"id": m, "base_url": server.base_url, "api_key_env": TEST_KEY_ENV} for m in MODELS]
        env["OABENCH_MODELS_FILE"] = str(write_models_file(root / "models.toml", entries))
        started = time.perf_counter()
        exit_code = cli(env, *args)
        wall = time.perf_counter() - started
        errors_first = error_rows(warehouse.read("inferences"))
        if errors_first:
            exit_code = cli(env, *args)
        stats = server.stats
    inferences = warehouse.read("inferences")
    answered = inferences.filter(~inferences["skipped"] & inferences["error"].is_null()).height
    return Row(
        profile=name,
        answered=answered,
        errors_first=errors_first,
        errors_after_rerun=error_rows(inferences),
        duplicate_paid=len(stats.duplicate_answers),
        retries=stats.total_requests - len(stats.requests_per_prompt),
        faults=sum(stats.faults.values()),
        wall_s=wall,
        exit_code=exit_code,
    )


def print_table(rows: list[Row]) -> None:
    baseline = next((r.wall_s for r in rows if r.profile == "none"), rows[0].wall_s)
    print("| profile | answered | error rows (→ after rerun) | dup. paid | retries | faults | wall | exit |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.profile} | {r.answered}/{ACTIVE_PER_MODEL * len(MODELS)} | "
            f"{r.errors_first} → {r.errors_after_rerun} | {r.duplicate_paid} | {r.retries} | {r.faults} | "
            f"{r.wall_s:.1f} s (×{r.wall_s / baseline:.2f}) | {r.exit_code} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--latency-s", type=float, default=0.01)
    parser.add_argument("--profiles", default=",".join(PROFILES))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="oabench-reliability-") as tmp:
        template = ingest_template(Path(tmp) / "template")
        rows = []
        for name in args.profiles.split(","):
            rows.append(measure(name, PROFILES[name], template, Path(tmp) / name, args.latency_s))
            print(f"{name}: done", file=sys.stderr, flush=True)
        print_table(rows)


if __name__ == "__main__":
    main()

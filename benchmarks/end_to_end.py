"""End-to-end speed: ingest → run (2 baselines + 3 replayed models on the study's suite) → leaderboard, cold
and as a no-op rerun.

From an empty warehouse and DAGSTER_HOME (the ingest takes every registry edition: 29), runs the real
`oabench` CLI (one process per command, as a user would) against a loopback mirror of the official host
(`../shared/oab/mirror`) and a loopback
OpenAI-compatible server replaying the published DeepSeek V3.2, Grok 4.1 Fast and Claude Haiku 4.5
replies with zero latency. Prints each stage's wall time, the totals against the targets (cold < 60 s,
no-op rerun < 10 s) and the requests the rerun made (must be 0 model requests and 0 downloads).

Run: .venv/bin/python benchmarks/end_to_end.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from oabench_pipeline.warehouse import Warehouse
from oabench_pipeline_tests.conftest import shared_oab_dir
from oabench_pipeline_tests.inference.replay import REPLAYED, TEST_KEY, TEST_KEY_ENV, published_replies
from oabench_pipeline_tests.pipeline_env import write_models_file
from oabench_pipeline_tests.servers.openai_replay import ReplayServer
from oabench_pipeline_tests.servers.static_files import StaticFileServer

COLD_TARGET_S = 60.0
NOOP_TARGET_S = 10.0
BASELINES = ["baseline/random", "baseline/longest-choice"]
OABENCH = str(Path(sys.executable).with_name("oabench"))


def timed(label: str, args: list[str], env: dict[str, str], rows: list[tuple[str, float]]) -> None:
    start = time.perf_counter()
    result = subprocess.run([OABENCH, *args], env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(
            f"`oabench {' '.join(args)}` failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    rows.append((label, elapsed))


def models_file(folder: Path, base_url: str) -> Path:
    entries = [{"id": b, "kind": "baseline"} for b in BASELINES]
    entries += [{"id": m, "base_url": base_url, "api_key_env": TEST_KEY_ENV} for m in REPLAYED]
    return write_models_file(folder / "models.toml", entries)


def print_stages(title: str, rows: list[tuple[str, float]], target: float) -> float:
    total = sum(t for _, t in rows)
    print(f"\n{title}")
    for label, seconds in rows:
        print(f"  {label:<38} {seconds:6.2f} s")
    print(f"  {'total':<38} {total:6.2f} s   target < {target:.0f} s   ratio to target {total / target:.2f}")
    return total


def main() -> None:
    shared = shared_oab_dir()
    with (
        tempfile.TemporaryDirectory(prefix="oabench-e2e-") as tmp,
        StaticFileServer(shared / "mirror") as mirror,
    ):
        root = Path(tmp)
        env = {
            **os.environ,
            "OABENCH_WAREHOUSE": str(root / "warehouse" / "oabench.duckdb"),
            "DAGSTER_HOME": str(root / "dagster_home"),
            "OABENCH_SOURCE_BASE_URL": mirror.base_url,
            TEST_KEY_ENV: TEST_KEY,
        }
        cold: list[tuple[str, float]] = []
        timed("oabench ingest (download + parse)", ["ingest"], env, cold)
        warehouse = Warehouse(root / "warehouse" / "oabench.duckdb")
        replies = published_replies(shared, warehouse)
        with ReplayServer(replies=replies, latency_s=0.0, api_key=TEST_KEY) as server:
            env["OABENCH_MODELS_FILE"] = str(models_file(root, server.base_url))
            timed("oabench run (5 models × 3 editions)", ["run", "--suite", "oabench-2026"], env, cold)
            timed("oabench leaderboard", ["leaderboard"], env, cold)
            downloads_before, calls_before = mirror.total_requests, server.stats.total_requests
            noop: list[tuple[str, float]] = []
            timed("oabench ingest", ["ingest"], env, noop)
            timed("oabench run", ["run", "--suite", "oabench-2026"], env, noop)
            timed("oabench leaderboard", ["leaderboard"], env, noop)
            downloads, calls = (
                mirror.total_requests - downloads_before,
                server.stats.total_requests - calls_before,
            )
            cold_calls = calls_before
        cold_total = print_stages("cold (empty warehouse and DAGSTER_HOME)", cold, COLD_TARGET_S)
        noop_total = print_stages("no-op rerun", noop, NOOP_TARGET_S)
        print(
            f"\nmodel requests: cold {cold_calls} (3 models × 238), no-op rerun {calls}; downloads in rerun: {downloads}"
        )
        ok = cold_total < COLD_TARGET_S and noop_total < NOOP_TARGET_S and calls == 0 and downloads == 0
        print("targets met" if ok else "TARGETS MISSED")


if __name__ == "__main__":
    main()

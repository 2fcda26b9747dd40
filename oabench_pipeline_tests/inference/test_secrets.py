"""The API key must never be stored or printed, even when an endpoint echoes it back in its errors.

The CLI runs as a real subprocess here, so its stdout and stderr are exactly what a user (or a CI log)
would keep.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl

from oabench_pipeline.partitions import cell_partition_key
from oabench_pipeline_tests.inference.replay import TEST_KEY, TEST_KEY_ENV
from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file
from oabench_pipeline_tests.servers.openai_replay import FaultProfile, ReplayServer

EDITION = "45"
OABENCH = Path(sys.executable).parent / "oabench"


def oabench(env: PipelineEnv, *args: str) -> subprocess.CompletedProcess[bytes]:
    """`oabench ARGS` in a child process with the test environment (monkeypatched os.environ)."""
    child_env = {**os.environ, "OABENCH_LOG_LEVEL": "INFO"}  # Dagster's console log on stderr too
    return subprocess.run(
        [str(OABENCH), *args], cwd=env.root, env=child_env, capture_output=True, timeout=900, check=False
    )


def files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_key_is_in_no_file_and_no_output(fresh_env: PipelineEnv) -> None:
    echo = {"echo_authorization": True}
    with (
        ReplayServer(api_key=TEST_KEY) as ok,
        ReplayServer(
            api_key=TEST_KEY, faults=FaultProfile(rate_5xx=0.3, max_faults_per_prompt=1, **echo)
        ) as flaky,
        ReplayServer(
            faults=FaultProfile(fixed_status=400, fixed_status_message="prompt too long", **echo)
        ) as bad,
        ReplayServer(
            faults=FaultProfile(fixed_status=401, fixed_status_message="key revoked", **echo)
        ) as denied,
    ):
        fresh_env.set(TEST_KEY_ENV, TEST_KEY)
        entries = [
            {"id": "acme/ok", "base_url": ok.base_url},
            {"id": "acme/flaky", "base_url": flaky.base_url},
            {"id": "acme/echo-400", "base_url": bad.base_url},
            {"id": "acme/echo-401", "base_url": denied.base_url},
        ]
        registry = write_models_file(
            fresh_env.root / "models.toml", [{**e, "api_key_env": TEST_KEY_ENV} for e in entries]
        )
        fresh_env.set("OABENCH_MODELS_FILE", registry)

        # One process for the four cells (a process is what this test pays for): the key rejected by one
        # endpoint stops that cell only, so the run exits 1 and the two good cells still complete.
        models = "acme/ok,acme/flaky,acme/echo-400,acme/echo-401"
        failing = oabench(fresh_env, "run", "--models", models, "--editions", EDITION)
        assert failing.returncode == 1, failing.stderr.decode()

        # The key really was sent, and the failing endpoints really did echo it back.
        assert ok.stats.authorization_headers == {f"Bearer {TEST_KEY}"}
        assert flaky.stats.faults.get("5xx", 0) > 0
        assert bad.stats.total_requests == 80 and denied.stats.total_requests >= 1

    for good in ("acme/ok", "acme/flaky"):
        cell = fresh_env.warehouse.read("inferences", str(cell_partition_key(good, EDITION)))
        assert cell.height == 80 and cell["error"].null_count() == 80, good

    needle = TEST_KEY.encode()
    outputs = {"stdout": failing.stdout, "stderr": failing.stderr}
    assert [name for name, text in outputs.items() if needle in text] == []
    warehouse_dir = fresh_env.settings.warehouse_path.parent
    dagster_home = Path(os.environ["DAGSTER_HOME"])
    assert files_containing(warehouse_dir, needle) == []
    assert files_containing(dagster_home, needle) == []

    # What the echoing endpoints said did land in rows, logs and output, redacted.
    printed = (failing.stdout + failing.stderr).decode()
    assert "HTTP 401" in printed and "acme/echo-401" in printed and "***" in printed
    rows = fresh_env.warehouse.read("inferences", str(cell_partition_key("acme/echo-400", EDITION)))
    assert rows.filter(pl.col("error").str.contains("prompt too long", literal=True)).height == 80
    assert rows.filter(pl.col("error").str.contains("***", literal=True)).height == 80
    assert files_containing(warehouse_dir / "responses", b"Authorization: ***")
    assert files_containing(dagster_home, b"HTTP 401"), "the failure reached the event log we scanned"
    assert not fresh_env.warehouse.partition_path(
        "inferences", str(cell_partition_key("acme/echo-401", EDITION))
    ).exists()

"""A full DAGSTER_HOME (a size-limited tmpfs under the test's instance): `oabench run` says so in one line.

Needs root (mount); skipped with the reason otherwise. The model is the loopback replay server.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from oabench_pipeline.engine.runs import instance_for
from oabench_pipeline_tests.inference.run_processes import MODEL, exit_within, output, replay, start_run
from oabench_pipeline_tests.inference.test_disk_full import fill_leaving, small_tmpfs
from oabench_pipeline_tests.pipeline_env import PipelineEnv

# Slow: `oabench run` processes on a full instance folder.
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("room_kib", [16, 256])
def test_a_full_dagster_home_is_one_line_not_a_traceback(
    fresh_env: PipelineEnv, shared_oab: Path, stop_children: list, room_kib: int
) -> None:
    home = fresh_env.root / "full_home"
    with small_tmpfs(home, 20 * 1024 * 1024):
        fresh_env.set("DAGSTER_HOME", str(home))
        with instance_for(fresh_env.settings):
            pass  # its storage created: the disk fills up after
        server = replay(fresh_env, shared_oab, latency_s=0.0, concurrency=4)
        try:
            fill_leaving(home, room_kib * 1024)
            proc = start_run(fresh_env, "full", "--models", MODEL, "--editions", "44")
            stop_children.append(proc)
            returncode = exit_within(proc, fresh_env, "full", 300)
        finally:
            server.__exit__(None, None, None)
    said = output(fresh_env, "full")
    assert returncode == 1, said
    assert "Traceback" not in said, said
    assert "disk I/O error" in said or "disk is full" in said, said
    assert len(said.splitlines()) <= 4, said  # at most the cell's line, the total and the error's one line

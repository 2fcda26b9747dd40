"""`oabench run` when Dagster's code server stops starting runs mid-command (killed, or too slow under
load): each cell it did not start fails in one line, the others finish and are scored and ranked, the
command exits 1 without a traceback, no run is left in progress, and a rerun asks only what is missing.

The code server is SIGKILLed by the last cell's run worker to start, before the server hears that it did
(`code_server_site/sitecustomize.py`): the cells whose launches had returned run on (their workers outlive
it); that one and any launch still waiting for the server fail, although their workers may start (they find
their runs failed and end, or, started already, are followed). `engine/launch.py` starts at most
`LAUNCHES_AT_ONCE` at a time, so with more cells than that some finished launching first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import DagsterRunStatus, RunsFilter

from oabench_pipeline.engine.launch import LAUNCHES_AT_ONCE
from oabench_pipeline.engine.runs import instance_for
from oabench_pipeline.engine.stale_runs import IN_PROGRESS
from oabench_pipeline.inference.cell import cell_name
from oabench_pipeline_tests.conftest import REPO_ROOT
from oabench_pipeline_tests.inference.paid_calls import active_prompt_keys
from oabench_pipeline_tests.inference.replay import REPLAYED, TEST_KEY_ENV
from oabench_pipeline_tests.inference.run_processes import exit_within, output, replay
from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file

# Slow: two `oabench run` commands, eight launched runs and a killed code server (~40 s on 2 cores).
pytestmark = pytest.mark.slow

# Cells that call a model, each launched (a baseline's would run in the command's process).
MODELS = list(REPLAYED)
EDITIONS = ["44", "45"]
CODE_SERVER_SITE = Path(__file__).parent / "code_server_site"


def test_launches_the_code_server_fails_end_their_cells_in_one_line_and_the_rest_is_scored(
    fresh_env: PipelineEnv, shared_oab: Path, stop_children: list
) -> None:
    cells = [(model, edition) for model in MODELS for edition in EDITIONS]
    assert len(cells) > LAUNCHES_AT_ONCE + 1, "no launch would be sure to return before the kill"
    server = replay(fresh_env, shared_oab, latency_s=0.0, concurrency=4)
    replayed = [
        {"id": model, "base_url": server.base_url, "api_key_env": TEST_KEY_ENV, "concurrency": 4}
        for model in MODELS
    ]
    fresh_env.set("OABENCH_MODELS_FILE", write_models_file(fresh_env.root / "models.toml", replayed))
    try:
        args = ["--models", ",".join(MODELS), "--editions", ",".join(EDITIONS)]
        paths = [str(CODE_SERVER_SITE), str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]
        proc = subprocess.Popen(
            [sys.executable, "-m", "oabench_pipeline.cli", "run", *args],
            cwd=REPO_ROOT,
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(p for p in paths if p),
                "OABENCH_TEST_KILL_CODE_SERVER_AT": str(len(cells)),
                "OABENCH_TEST_KILL_CODE_SERVER_COUNT": str(fresh_env.root / "workers.count"),
                "PYTHONFAULTHANDLER": "1",
            },
            stdout=(fresh_env.root / "killed.out").open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        stop_children.append(proc)
        returncode = exit_within(proc, fresh_env, "killed", 300)
        said = output(fresh_env, "killed")
        assert returncode == 1, said
        assert "Traceback" not in said, said

        # One line per cell the server did not start, in the last lines, saying so; the rest succeeded.
        failed = []
        for model, edition in cells:
            lines = [line for line in said.splitlines() if line.startswith(f"  {model} × {edition}: ")]
            assert len(lines) <= 1, lines
            if lines:
                assert "not launched: Dagster's code server failed" in lines[0], lines
                failed.append((model, edition))
        succeeded = [cell for cell in cells if cell not in failed]
        assert failed and len(succeeded) >= len(cells) - LAUNCHES_AT_ONCE, said
        assert f"{len(failed)} of {len(cells)} cell(s) not complete" in said, said
        assert "leaderboard rebuilt" in said, said
        for model, edition in succeeded:
            assert fresh_env.warehouse.read("scores", cell_name(model, edition)).height == 80, (
                model,
                edition,
            )
        with instance_for(fresh_env.settings) as instance:
            left = instance.get_runs(RunsFilter(statuses=[*IN_PROGRESS, DagsterRunStatus.NOT_STARTED]))
        assert not left, [(run.run_id, run.status) for run in left]
        status = fresh_env.cli("status", *args, "--format", "json")
        states = {(c["model_key"], c["edition"]): c for c in json.loads(status.output)["cells"]}
        for cell in failed:
            assert states[cell]["state"] == "failed", status.output
            assert "not launched" in states[cell]["reason"], states[cell]

        rerun = fresh_env.cli("run", *args)
        assert rerun.exit_code == 0, rerun.output
        stats = server.stats
    finally:
        server.__exit__(None, None, None)
    keys = {
        key for model in MODELS for key in active_prompt_keys(fresh_env.warehouse, model, EDITIONS).values()
    }
    assert set(stats.answers_per_prompt) == keys
    assert set(stats.answers_per_prompt.values()) == {1}, "a question was paid twice"
    print(f"{len(failed)} of {len(cells)} cells not launched: {failed}\n{said}")

"""`oabench import` takes the cell lock of each partition it writes, as `oabench judge` holds it while it sends
and writes: an import that meets a judging run on one partition waits for it, and neither loses its rows."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import polars as pl
import pytest
from click.testing import Result

from oabench_pipeline.engine.runs import instance_for, instance_home
from oabench_pipeline.inference.cell_lock import CellLock
from oabench_pipeline.phase2.plans import judgments_lock_path
from oabench_pipeline.shared.partitions import judgment_partition_key
from oabench_pipeline_tests.phase2.ingested import copy_phase2, phase2_all_template_fixture
from oabench_pipeline_tests.phase2.oab_bench import oab_bench_folder
from oabench_pipeline_tests.pipeline_env import PipelineEnv, make_env
from oabench_pipeline_tests.servers.static_files import StaticFileServer

JUDGE, MODEL = "o3-2025-04-16", "sabia-3.1-2025-05-08"
GIVE_UP_S = 120.0


def _import_waits_for_the_lock(env: PipelineEnv, importing: threading.Thread) -> bool:
    """Whether the import's run said it waits for the lock (True) or ended without waiting (False)."""
    deadline = time.monotonic() + GIVE_UP_S
    with instance_for(env.settings) as instance:
        while importing.is_alive() and time.monotonic() < deadline:
            for record in instance.get_run_records():
                logs = instance.all_logs(record.dagster_run.run_id)
                if any("waiting for it" in (entry.user_message or "") for entry in logs):
                    return True
            time.sleep(0.2)
    return False


phase2_all_template = phase2_all_template_fixture()  # every 2nd-phase edition, ingested once per session


def test_an_import_waits_for_a_judging_run_holding_the_partition_and_both_keep_their_rows(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mirror_server: StaticFileServer,
    phase2_all_template: Path,
) -> None:
    env = make_env(tmp_path, monkeypatch, mirror_server.base_url)
    monkeypatch.setenv("DAGSTER_HOME", str(instance_home(env.settings)[0]))  # instance_for sets it
    copy_phase2(phase2_all_template, env)  # every 2nd-phase edition, ingested once per session
    partition = str(judgment_partition_key(JUDGE, MODEL))
    store = env.warehouse
    judging = CellLock(judgments_lock_path(store.root, JUDGE, MODEL))
    judging.acquire()  # a judging run of the partition: it read it (empty) and is sending
    existing = store.read("phase2_judgments", partition)
    results: list[Result] = []
    importing = threading.Thread(target=lambda: results.append(env.cli("import", str(oab_bench_folder()))))
    importing.start()
    try:
        waited = _import_waits_for_the_lock(env, importing)
        live = pl.DataFrame(
            {
                "judge_key": [JUDGE],
                "model_key": [MODEL],
                "item_id": ["39_direito_civil_questao_1"],
                "turn": [1],
                "score": [0.5],
                "valid": [True],
                "source": ["live"],
                "answer_run_id": ["live-run"],
            }
        )
        # The judging run writes what it read plus its judgment, then lets go of the lock.
        store.write_partition(
            "phase2_judgments", pl.concat([existing, live], how="diagonal_relaxed"), partition
        )
    finally:
        judging.release()
        importing.join(GIVE_UP_S)
    assert waited, "the import wrote the partition while a judging run held its lock"
    assert results and results[0].exit_code == 0, results[0].output if results else "no result"
    rows = store.read("phase2_judgments", partition)
    assert rows.filter(pl.col("source") == "live").height == 1, "the judging run's row was lost"
    assert rows.filter(pl.col("source") != "live").height == 189, "the import's rows were lost"

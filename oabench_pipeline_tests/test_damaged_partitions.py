"""Damaged partition files in a real warehouse: named in one line, and rebuilt by the command that owns them.

`oabench run` rebuilds an unreadable `inferences` partition from the response log (no request; a baseline
cell is recomputed; damaged lines of the log are set aside and only what they lost is asked again), `oabench ingest` an unreadable `questions`/`answer_keys` partition from the stored
PDFs (no download); `oabench status` reports the damage instead of crashing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

from oabench_pipeline.inference.log_records import inspect_log
from oabench_pipeline.inference.response_log import cell_log_path, read_log
from oabench_pipeline_tests.inference.replay import TEST_KEY, TEST_KEY_ENV
from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file
from oabench_pipeline_tests.saved_envs import fresh_env_with_instance_per_module
from oabench_pipeline_tests.servers.openai_replay import ReplayServer
from oabench_pipeline_tests.servers.static_files import StaticFileServer

EDITION = "45"
MODEL = "acme/damaged"
BASELINE = "baseline/random"


ingested_with_instance, fresh_env = fresh_env_with_instance_per_module("damaged")


def truncate(path: Path) -> None:
    """What a crash of the disk, a full disk or a bad copy leaves: the file's first half."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def use_models(env: PipelineEnv, base_url: str) -> None:
    env.set(TEST_KEY_ENV, TEST_KEY)
    entries = [
        {"id": MODEL, "base_url": base_url, "api_key_env": TEST_KEY_ENV, "concurrency": 8},
        {"id": BASELINE, "kind": "baseline"},
    ]
    env.set("OABENCH_MODELS_FILE", write_models_file(env.root / "models.toml", entries))


def count_through_duckdb(env: PipelineEnv, table: str) -> int:
    with duckdb.connect(str(env.settings.warehouse_path), read_only=True) as con:
        return con.execute(f"select count(*) from {table}").fetchone()[0]


def damage_log(log: Path) -> dict[str, str]:
    """The response log damaged three ways (issue 23): a field of the wrong type whose reply survives, an
    answer of the wrong type, a half-written last line. Returns what each damaged line answered."""
    lines = log.read_text(encoding="utf-8").splitlines()
    qids = {name: json.loads(lines[number - 1])["qid"] for name, number in (("latency", 3), ("answer", 7))}
    qids["torn"] = json.loads(lines[-1])["qid"]
    lines[2] = re.sub(r'"latency_ms": \d+', '"latency_ms": "abc"', lines[2])
    lines[6] = re.sub(r'"raw_response": "[^"]*"', '"raw_response": {"x": 1}', lines[6])
    log.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2], encoding="utf-8")
    return qids


@pytest.mark.slow
def test_unreadable_cells_are_rebuilt_from_the_log_and_damaged_log_lines_set_aside(
    fresh_env: PipelineEnv,
) -> None:
    """Unreadable partitions are rebuilt from the response log with no request; damaged lines of that log
    are named (`file:line: why`), set aside in its `.damaged` sidecar, and never fatal: a reply whose text
    survived keeps it (its bad `latency_ms` NULL), an unusable one is asked again, once, and the next
    run finds nothing left to repair."""
    with ReplayServer(api_key=TEST_KEY) as server:
        use_models(fresh_env, server.base_url)
        first = fresh_env.cli("run", "--models", f"{MODEL},{BASELINE}", "--editions", EDITION)
        assert first.exit_code == 0, first.output
        assert server.stats.total_requests == 80
        store = fresh_env.warehouse
        api_cell = store.partition_path("inferences", f"{EDITION}|{MODEL}")
        baseline_cell = store.partition_path("inferences", f"{EDITION}|{BASELINE}")
        for path in (api_cell, baseline_cell, store.partition_path("scores", f"{EDITION}|{MODEL}")):
            truncate(path)
        truncate(store.partition_path("leaderboard_by_area"))
        log = cell_log_path(store.root / "responses", MODEL, EDITION)
        damaged = damage_log(log)

        status = fresh_env.cli("status", "--models", MODEL, "--editions", EDITION, "--format", "json")
        assert status.exit_code == 1, status.output
        assert "Traceback" not in status.output
        (cell,) = json.loads(status.output)["cells"]
        assert cell["state"] == "failed"
        assert cell["reason"].startswith(
            f"table inferences, partition {EDITION}|{MODEL}: {api_cell} is unreadable"
        )
        assert f"`oabench run --models {MODEL} --editions {EDITION}` rebuilds it" in cell["reason"]
        assert (
            f"damaged response log: {log}:3: field 'latency_ms': Input should be a valid integer (got 'abc')"
            in cell["reason"]
        )
        assert "(and 2 more damaged line(s)); `oabench run --models " in cell["reason"]
        assert cell["reason"].endswith("` sets them aside")

        rerun = fresh_env.cli("run", "--models", f"{MODEL},{BASELINE}", "--editions", EDITION)
        assert rerun.exit_code == 0, rerun.output
        asked = server.stats.requests_per_prompt
        assert server.stats.total_requests == 82, "only the two answers the log lost are asked again"
        assert sorted(n for n in asked.values() if n > 1) == [2, 2]
        assert (
            f"table inferences, file {api_cell}: unreadable, set aside as .{api_cell.name}.damaged"
            in rerun.output
        )
        assert f"table inferences, file {baseline_cell}: unreadable" in rerun.output
        sidecar = log.with_name("45.jsonl.damaged")
        for line in (
            f"{log}:3: field 'latency_ms': Input should be a valid integer (got 'abc'); the reply is kept, "
            f"with latency_ms NULL (set aside in {sidecar.name})",
            f"{log}:7: field 'raw_response': Input should be a valid string (got {{'x': 1}}); the answer is "
            "unusable: counted as not answered, asked again once unless another answer to it is kept "
            f"(set aside in {sidecar.name})",
            f"{log}:80: half-written last line (the process was killed while writing it?); the answer is "
            "unusable",
        ):
            assert line in rerun.output, rerun.output
        assert "Traceback" not in rerun.output
        rows = {r["qid"]: r for r in store.read("inferences", f"{EDITION}|{MODEL}").iter_rows(named=True)}
        assert rows[damaged["latency"]]["latency_ms"] is None and rows[damaged["latency"]]["raw_response"]
        assert all(rows[damaged[k]]["raw_response"] and rows[damaged[k]]["error"] is None for k in damaged)
        aside = [json.loads(line) for line in sidecar.read_text(encoding="utf-8").splitlines()]
        assert [(a["line"], a["salvaged"]) for a in aside] == [(3, True), (7, False), (80, False)]
        assert '"raw_response": {"x": 1}' in aside[1]["text"]
        assert len(read_log(log)) == 80 and not inspect_log(log).damaged  # 78 kept in place, 2 appended

        again = fresh_env.cli("run", "--models", f"{MODEL},{BASELINE}", "--editions", EDITION)
        assert again.exit_code == 0 and "up to date" in again.output, again.output
        assert server.stats.total_requests == 82 and "damaged" not in again.output

    assert store.read("inferences", f"{EDITION}|{MODEL}").height == 80
    assert store.read("inferences", f"{EDITION}|{BASELINE}").height == 80
    assert store.damaged_partitions("inferences") == store.damaged_partitions("scores") == []
    assert count_through_duckdb(fresh_env, "scores") == 160
    assert count_through_duckdb(fresh_env, "leaderboard_by_area") > 0
    assert (api_cell.parent / f".{api_cell.name}.damaged").is_file(), "kept for inspection, out of the table"


@pytest.mark.slow
def test_another_cells_damaged_files_stop_neither_the_run_nor_the_scoring_of_this_one(
    fresh_env: PipelineEnv,
) -> None:
    """Issue 23.2 with a damaged cell: the baseline cell's `inferences` and `scores` files unreadable must
    not stop `oabench run` of the model's cell. They did: the models step and the model's own scoring read
    every table's files (`models registry: FAILED`, or `scores: ...DamagedPartitionError` on the model's
    cell). The damaged cell stays out of the analysis tables until its own run rebuilds it."""
    with ReplayServer(api_key=TEST_KEY) as server:
        use_models(fresh_env, server.base_url)
        first = fresh_env.cli("run", "--models", f"{MODEL},{BASELINE}", "--editions", EDITION)
        assert first.exit_code == 0, first.output
        store = fresh_env.warehouse
        for table in ("inferences", "scores"):
            truncate(store.partition_path(table, f"{EDITION}|{BASELINE}"))
        model_scores = store.partition_path("scores", f"{EDITION}|{MODEL}")
        scored_before = model_scores.stat().st_mtime_ns

        other = fresh_env.cli("run", "--models", MODEL, "--editions", EDITION, "--force")
        assert other.exit_code == 0, other.output
        assert "FAILED" not in other.output and "Traceback" not in other.output
        assert f"{MODEL} × {EDITION}: answers up to date, re-scored" in other.output
        assert model_scores.stat().st_mtime_ns > scored_before
        assert sorted(store.read("leaderboard")["model_key"]) == [MODEL]  # the damaged cell left out
        assert server.stats.total_requests == 80

        status = fresh_env.cli("status", "--models", BASELINE, "--editions", EDITION, "--format", "json")
        (cell,) = json.loads(status.output)["cells"]
        assert cell["state"] == "failed" and "is unreadable" in cell["reason"], cell

        repaired = fresh_env.cli("run", "--models", BASELINE, "--editions", EDITION)
        assert repaired.exit_code == 0, repaired.output
    assert sorted(store.read("leaderboard")["model_key"]) == sorted([BASELINE, MODEL])
    assert store.damaged_partitions("inferences") == store.damaged_partitions("scores") == []


def test_unreadable_exam_tables_are_named_then_rebuilt_by_ingest_without_download(
    fresh_env: PipelineEnv, mirror_server: StaticFileServer
) -> None:
    fresh_env.monkeypatch.delenv("OABENCH_MODELS_FILE", raising=False)
    store = fresh_env.warehouse
    questions = store.partition_path("questions", EDITION)
    truncate(questions)
    truncate(store.partition_path("answer_keys", EDITION))

    refused = fresh_env.cli("run", "--models", BASELINE, "--editions", EDITION)
    assert refused.exit_code == 1, refused.output
    assert "Traceback" not in refused.output
    (line,) = [text for text in refused.output.splitlines() if text.startswith("Error: ")]
    assert f"table questions, partition {EDITION}: {questions} is unreadable" in line
    assert f"`oabench ingest --editions {EDITION}` rebuilds it from the stored PDFs" in line

    downloads = mirror_server.total_requests
    repaired = fresh_env.cli("ingest", "--editions", EDITION)
    assert repaired.exit_code == 0, repaired.output
    assert f"edition {EDITION}: 80 questions, 80 active, 0 annulled" in repaired.output
    assert mirror_server.total_requests == downloads, "the stored PDFs are reused"
    assert store.damaged_partitions("questions") == store.damaged_partitions("answer_keys") == []
    assert store.read("questions", EDITION).height == 80
    assert store.read("answer_keys", EDITION).height == 80

    # The same command now gets past the check that refused it (a dry run: what follows the check is
    # any baseline run's, e.g. test_status.py's).
    planned = fresh_env.cli("run", "--models", BASELINE, "--editions", EDITION, "--dry-run")
    assert planned.exit_code == 0, planned.output
    assert f"{BASELINE} × {EDITION}: 0 call(s)" in planned.output


@pytest.mark.slow
def test_unreadable_imported_cell_is_never_asked_and_a_reimport_restores_it(
    fresh_env: PipelineEnv, shared_oab: Path
) -> None:
    """An imported cell has no response log: rebuilding it by asking the model would pay for it again."""
    run = shared_oab / "published-runs" / "2026-03-03T16-55-22-893Z_deepseek--deepseek-v3.2_direto"
    folder = fresh_env.root / "runs"
    folder.mkdir()
    (folder / run.name).symlink_to(run)
    model = "deepseek/deepseek-v3.2"
    with ReplayServer(api_key=TEST_KEY) as server:
        fresh_env.set(TEST_KEY_ENV, TEST_KEY)
        entry = {"id": model, "base_url": server.base_url, "api_key_env": TEST_KEY_ENV}
        fresh_env.set("OABENCH_MODELS_FILE", write_models_file(fresh_env.root / "models.toml", [entry]))
        imported = fresh_env.cli("import", str(folder))
        assert imported.exit_code == 0, imported.output
        cell = fresh_env.warehouse.partition_path("inferences", f"{EDITION}|{model}")
        truncate(cell)

        skipped = fresh_env.cli("run", "--models", model, "--editions", EDITION)
        assert (
            "unreadable and no response log" in skipped.output and "skipped, nothing asked" in skipped.output
        )
        assert server.stats.total_requests == 0
        assert cell.is_file(), "left in place, so the next run does not take the cell for missing"

        restored = fresh_env.cli("import", str(folder))
        assert restored.exit_code == 0, restored.output
        assert "unreadable, set aside" in restored.output
        assert fresh_env.warehouse.read("inferences", f"{EDITION}|{model}").height == 80
        # The same rows again: the cells' scores stay current and no cell is scored again (the answers were
        # rewritten, so the leaderboard is rebuilt from them).
        assert f"imported 3 cell(s) from {folder}; scored 0; leaderboard rebuilt" in restored.output
        assert server.stats.total_requests == 0

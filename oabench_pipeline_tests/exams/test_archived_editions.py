"""Archived editions through the real pipeline: the downloader over loopback, the answer-key asset, the registry.

The 3rd (100 questions, a preliminary key, an annulment only the registry knows) is fetched from the
mirror served on 127.0.0.1 and its key materialized (the 9th's key, which marks its own annulments, and
every other archived key: `core/test_answer_key.py`). A registry edit (an annulment learnt later, a moved
area boundary) reaches the tables on the next `oabench ingest`, recorded as the registry's.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import polars as pl
import pytest
import tomli_w

from oabench_pipeline.core.editions import DEFAULT_EDITIONS_FILE
from oabench_pipeline.definitions import build_definitions
from oabench_pipeline.runner import ensure_partitions, instance_for, run_assets
from oabench_pipeline_tests.pipeline_env import PipelineEnv, make_env
from oabench_pipeline_tests.servers.static_files import StaticFileServer

REGISTRY_SOURCE = "registry: legal-nlp/oab-exams transcription"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory, mirror_server: StaticFileServer) -> PipelineEnv:
    """The 3rd's PDFs, downloaded from the mirror, and its answer key, materialized once."""
    monkeypatch = pytest.MonkeyPatch()
    env = make_env(tmp_path_factory.mktemp("archived"), monkeypatch, mirror_server.base_url)
    with instance_for(env.settings) as instance:
        ensure_partitions(instance, "editions", ["3"])
        outcome = run_assets(build_definitions(env.settings), instance, ["exam_pdfs", "answer_keys"], "3")
        assert outcome.success, outcome.errors
    yield env
    monkeypatch.undo()


def test_the_3rd_has_100_answers_and_the_registry_annuls_72(keyed: PipelineEnv) -> None:
    key = keyed.warehouse.read("answer_keys", "3").sort("number")
    assert key["number"].to_list() == list(range(1, 101))
    assert set(key["key_status"]) == {"preliminary"} and set(key["exam_date"].cast(str)) == {"2011-02-13"}
    annulled = key.filter(pl.col("status") == "annulled")
    assert annulled["number"].to_list() == [72]
    assert annulled["correct"].to_list() == [None]  # the preliminary letter is not scored
    assert annulled["status_source"].item().startswith(REGISTRY_SOURCE)
    assert set(key.filter(pl.col("status") == "active")["status_source"]) == {"key"}


def test_a_registry_annulment_and_area_edit_reach_the_tables_on_the_next_ingest(
    fresh_env: PipelineEnv, tmp_path: Path
) -> None:
    """44 is ingested and up to date; the registry then annuls its question 5 and moves a boundary."""
    assert "(up to date)" in fresh_env.cli("ingest", "--editions", "44").output
    document = tomllib.loads(DEFAULT_EDITIONS_FILE.read_text(encoding="utf-8"))
    [entry] = [e for e in document["editions"] if e["edition"] == 44]
    entry.update(annulled=[5], annulled_source="a test", area_scheme="moved")
    moved = [dict(span) for span in document["area_schemes"]["fgv-2025"]]
    moved[0]["last"], moved[1]["first"] = 9, 10  # Ética 1-9, Filosofia 10
    document["area_schemes"]["moved"] = moved
    edited = tmp_path / "editions.toml"
    edited.write_text(tomli_w.dumps(document), encoding="utf-8")
    fresh_env.set("OABENCH_EDITIONS_FILE", edited)

    result = fresh_env.cli("ingest", "--editions", "44")
    assert result.exit_code == 0, result.output
    assert "edition 44: 80 questions, 79 active, 1 annulled (5 by the registry) [" in result.output
    questions = fresh_env.warehouse.read("questions", "44").sort("number")
    fifth = questions.filter(pl.col("number") == 5).row(0, named=True)
    assert (fifth["status"], fifth["status_source"]) == ("annulled", "registry: a test")
    assert questions.filter(pl.col("number") == 9)["area"].item() == "Ética Profissional"
    assert (
        fresh_env.warehouse.read("answer_keys", "44").filter(pl.col("number") == 5)["correct"].item() is None
    )
    assert "(up to date)" in fresh_env.cli("ingest", "--editions", "44").output  # and now it is current

"""Archived editions through the real pipeline: the downloader over loopback, the answer-key asset, the registry.

The 3rd (100 questions, a preliminary key, an annulment only the registry knows) is ingested from the
mirror served on 127.0.0.1 by `oabench ingest` (the 9th's key, which marks its own annulments, and every
other archived key: `core/test_answer_key.py`; every archived booklet: the `archive` marker). A registry edit (an annulment learnt later, a moved
area boundary) reaches the tables on the next `oabench ingest`, recorded as the registry's.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import polars as pl
import pytest
import tomli_w

from oabench_pipeline.core.editions import DEFAULT_EDITIONS_FILE
from oabench_pipeline_tests.pipeline_env import PipelineEnv, make_env
from oabench_pipeline_tests.servers.static_files import StaticFileServer

REGISTRY_SOURCE = "registry: legal-nlp/oab-exams transcription"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory, mirror_server: StaticFileServer) -> PipelineEnv:
    """`oabench ingest --editions 3`: the 3rd's PDFs downloaded from the mirror, its key and booklet parsed."""
    monkeypatch = pytest.MonkeyPatch()
    env = make_env(tmp_path_factory.mktemp("archived"), monkeypatch, mirror_server.base_url)
    result = env.cli("ingest", "--editions", "3")
    assert result.exit_code == 0, result.output
    assert "edition 3: 100 questions, 99 active, 1 annulled (72 per the registry); preliminary answer key" in (
        result.output
    )
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


def test_the_3rd_questions_take_the_registry_annulment_and_its_area_scheme(keyed: PipelineEnv) -> None:
    questions = keyed.warehouse.read("questions", "3").sort("number")
    assert questions.height == 100
    q72 = questions.filter(pl.col("number") == 72).row(0, named=True)
    assert (q72["status"], q72["key_status"]) == ("annulled", "preliminary")
    assert q72["status_source"].startswith(REGISTRY_SOURCE)
    areas = dict(questions.select("number", "area").iter_rows())
    # oab-2010.3: Administração opens the exam, Ética sits at 44-53, 90-100 mix four small areas.
    assert (areas[1], areas[44], areas[53], areas[90], areas[92], areas[95], areas[96]) == (
        "Direito Administrativo",
        "Ética Profissional",
        "Ética Profissional",
        "Direito Ambiental",
        "Direito do Consumidor",
        "ECA (Criança e Adolescente)",
        "Direito Internacional",
    )


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
    assert "edition 44: 80 questions, 79 active, 1 annulled (5 per the registry) [" in result.output
    questions = fresh_env.warehouse.read("questions", "44").sort("number")
    fifth = questions.filter(pl.col("number") == 5).row(0, named=True)
    assert (fifth["status"], fifth["status_source"]) == ("annulled", "registry: a test")
    assert questions.filter(pl.col("number") == 9)["area"].item() == "Ética Profissional"
    assert (
        fresh_env.warehouse.read("answer_keys", "44").filter(pl.col("number") == 5)["correct"].item() is None
    )
    assert "(up to date)" in fresh_env.cli("ingest", "--editions", "44").output  # and now it is current

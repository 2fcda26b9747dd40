"""Archived editions through the real pipeline: the downloader over loopback, the answer-key asset, the registry.

The 3rd (100 questions, a preliminary key, an annulment only the registry knows) is ingested from the
mirror served on 127.0.0.1 by `oabench ingest` (the 9th's key, which marks its own annulments, and every
other archived key: `core/test_answer_key.py`; every archived booklet: the `archive` marker). A registry edit (an annulment learnt later, a moved
area boundary) reaches the tables on the next `oabench ingest`, recorded as the registry's. The 28th: its
key file's notice changes 47 to B, and its 37 is unresolved, scored in neither score.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import polars as pl
import pytest
import tomli_w

from oabench_pipeline.core.analysis.aggregates import EDITION_TOTALS_SQL
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
    assert (
        "edition 3: 100 questions, 99 active, 1 annulled (72 per the registry); preliminary answer key"
        in (result.output)
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
    # Where the answers come from: the annulment from the later key (as transcribed), the rest preliminary.
    q72 = annulled.row(0, named=True)
    assert (q72["key_document"], q72["changed_after_preliminary"], q72["preliminary_correct"]) == (
        "definitive",
        True,
        "C",
    )
    assert q72["status_note"] == (
        "annulled by the later key (source: legal-nlp/oab-exams transcription (official/raw/*.txt): answers "
        "marked NULL, annulled after the preliminary key)"
    )
    active = key.filter(pl.col("status") == "active")
    assert set(active["key_document"]) == {"preliminary"} and set(active["changed_after_preliminary"]) == {
        False
    }


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


@pytest.fixture(scope="module")
def the_28th(tmp_path_factory: pytest.TempPathFactory, mirror_server: StaticFileServer) -> PipelineEnv:
    """`oabench ingest --editions 28` from the mirror: a key file opening with the examiners' notice, and a
    question the registry holds unresolved."""
    monkeypatch = pytest.MonkeyPatch()
    env = make_env(tmp_path_factory.mktemp("the_28th"), monkeypatch, mirror_server.base_url)
    result = env.cli("ingest", "--editions", "28")
    assert result.exit_code == 0, result.output
    assert (
        "edition 28: 80 questions, 79 active, 0 annulled, 1 unresolved (37: scored in neither score); "
        "preliminary answer key" in result.output
    )
    yield env
    monkeypatch.undo()


def test_the_28th_47_is_b_from_the_notice_and_marked_changed(the_28th: PipelineEnv) -> None:
    key = the_28th.warehouse.read("answer_keys", "28").sort("number")
    q47 = key.filter(pl.col("number") == 47).row(0, named=True)
    assert (q47["correct"], q47["status"], q47["key_document"]) == ("B", "active", "preliminary")
    assert (q47["changed_after_preliminary"], q47["preliminary_correct"]) == (True, "A")
    assert q47["status_note"] == (
        "changed from A to B by the examiners' notice (COMUNICADO 19/03/2019, key file page 1)"
    )
    # Every other answer is the preliminary grid's, with no later change known.
    rest = key.filter(~pl.col("number").is_in([37, 47]))
    assert rest["correct"].to_list() == rest["preliminary_correct"].to_list()
    assert set(rest["changed_after_preliminary"]) == {False} and set(rest["status_note"]) == {None}


def test_the_28th_37_is_unresolved_not_scored_on_its_preliminary_answer(the_28th: PipelineEnv) -> None:
    key = the_28th.warehouse.read("answer_keys", "28").filter(pl.col("number") == 37).row(0, named=True)
    assert (key["status"], key["correct"], key["preliminary_correct"]) == ("unresolved", None, "D")
    assert key["status_source"] == "registry: unresolved" and key["changed_after_preliminary"] is None
    assert key["status_note"].startswith("unresolved: the preliminary key gives D; two public transcriptions")
    question = the_28th.warehouse.read("questions", "28").filter(pl.col("number") == 37).row(0, named=True)
    assert (question["status"], question["status_source"]) == ("unresolved", "registry: unresolved")


@pytest.mark.slow  # a baseline run through Dagster (~10 s)
def test_an_unresolved_question_is_in_neither_score(the_28th: PipelineEnv) -> None:
    result = the_28th.cli("run", "--models", "baseline/longest-choice", "--editions", "28")
    # Scored; the default suite (the study's 43rd-45th) has nothing to rank here, so no leaderboard.
    assert "baseline/longest-choice × 28: answered offline (baseline), scored" in result.output, result.output
    scores = the_28th.warehouse.query(
        "select number, status, is_correct_official, is_correct_technical, skipped from scores "
        "where edition = 28 order by number"
    )
    q37 = scores.filter(pl.col("number") == 37).row(0, named=True)
    assert (q37["status"], q37["is_correct_official"], q37["is_correct_technical"], q37["skipped"]) == (
        "unresolved",
        None,
        None,
        True,  # asked of no model: no call is paid for an answer nobody can score
    )
    assert scores["is_correct_official"].count() == scores["is_correct_technical"].count() == 79
    # The edition's totals, which the leaderboard's official and technical scores are out of.
    totals = the_28th.warehouse.query(EDITION_TOTALS_SQL).row(0, named=True)
    assert (totals["n_questions"], totals["annulled"], totals["active"]) == (79, 0, 79)

"""`oabench ingest` end to end: the real official PDFs served over loopback, through Dagster, into DuckDB."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import duckdb
import polars as pl
import pytest

from oabench_pipeline_tests.pipeline_env import STUDY_EDITIONS, PipelineEnv, make_env
from oabench_pipeline_tests.servers.static_files import StaticFileServer


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory, mirror_server: StaticFileServer) -> PipelineEnv:
    """The study's three real editions ingested once (module-scoped: the expensive part is shared)."""
    monkeypatch = pytest.MonkeyPatch()
    env = make_env(tmp_path_factory.mktemp("ingest"), monkeypatch, mirror_server.base_url)
    result = env.cli("ingest", "--editions", STUDY_EDITIONS)
    assert result.exit_code == 0, result.output
    yield env
    monkeypatch.undo()


def test_ingest_gives_240_questions_238_active(ingested: PipelineEnv) -> None:
    con = duckdb.connect(str(ingested.settings.warehouse_path), read_only=True)
    counts = con.sql(
        "select edition, count(*), count(*) filter (status = 'active') from questions group by 1 order by 1"
    ).fetchall()
    assert counts == [(43, 80, 78), (44, 80, 80), (45, 80, 80)]
    annulled = con.sql(
        "select qid, status_source from answer_keys where status = 'annulled' order by number"
    ).fetchall()
    assert annulled == [("oab-43-1f-q1", "key"), ("oab-43-1f-q74", "key")]  # the key's '*'
    assert con.sql("select distinct exam_date, key_status from questions where edition = 43").fetchall() == [
        (dt.date(2025, 4, 27), "definitive")
    ]
    assert con.execute(
        "select count(*) from answer_keys where correct is null and status = 'active'"
    ).fetchone() == (0,)


def test_editions_table_lists_every_registry_edition_with_its_key(ingested: PipelineEnv) -> None:
    editions = ingested.warehouse.read("editions").sort("edition")
    assert editions.height == 33
    third = editions.filter(pl.col("edition") == 3).row(0, named=True)
    assert (third["exam_label"], third["question_count"], third["key_status"], third["annulled"]) == (
        "2010.3",
        100,
        "preliminary",
        [72],
    )
    assert third["exam_page_url"] is None  # no portal page is known for the archived editions
    assert editions.filter(pl.col("key_status") == "definitive")["edition"].to_list() == [
        15,
        16,
        17,
        36,
        37,
        38,
        43,
        44,
        45,
    ]
    # Provenance of a file pinned from an archive: the examiners' own address of the same bytes.
    the_38th = editions.filter(pl.col("edition") == 38).row(0, named=True)
    assert (
        the_38th["booklet_official_url"]
        == "http://oab.fgv.br/arq/641/1180933_OABXXXVIII%20-%20Prova%20Tipo%201.pdf"
    )
    assert the_38th["answer_key_official_url"].startswith("http://oab.fgv.br/arq/641/77411_GABARITOS")
    the_28th = editions.filter(pl.col("edition") == 28).row(0, named=True)
    assert (the_28th["answer_key_official_url"], the_28th["unresolved"]) == (None, [37])  # none listed for it
    assert editions.filter(pl.col("edition") == 45)["booklet_official_url"].item() is None


def test_questions_take_status_from_answer_key(ingested: PipelineEnv) -> None:
    joined = ingested.warehouse.query(
        "select count(*) as n from questions q join answer_keys k using (qid) where q.status = k.status"
    )
    assert joined.item() == 240


def test_answer_letters_match_independent_published_scoring(ingested: PipelineEnv, shared_oab: Path) -> None:
    """The published OABench runs recorded the official letter per qid: all 240 agree with our parse."""
    recorded: dict[str, str | None] = {}
    for scored in (shared_oab / "published-runs").glob("*/scored.jsonl"):
        for line in scored.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            recorded[record["qid"]] = record["correctAnswer"]
    ours = dict(ingested.warehouse.read("answer_keys").select("qid", "correct").iter_rows())
    assert len(recorded) == 240
    assert ours == recorded


def test_provenance_from_pdf_bytes_to_every_question(ingested: PipelineEnv, manifest: dict) -> None:
    pins = {e["edition"]: e["prova"]["sha256"] for e in manifest["editions"]}
    questions = ingested.warehouse.read("questions")
    by_edition = questions.group_by("edition").agg(pl.col("source_sha256").unique())
    assert {r["edition"]: r["source_sha256"] for r in by_edition.iter_rows(named=True)} == {
        e: [sha] for e, sha in pins.items()
    }
    raw = ingested.settings.raw_dir
    assert sorted(p.name for p in raw.iterdir() if not p.name.startswith(".")) == sorted(
        [e["prova"]["sha256"] for e in manifest["editions"]]
        + [e["gabarito"]["sha256"] for e in manifest["editions"]]
    )


def test_second_ingest_makes_no_request_and_changes_nothing(
    ingested: PipelineEnv, mirror_server: StaticFileServer
) -> None:
    tables = ("editions", "questions", "answer_keys", "source_files")
    before = {t: ingested.warehouse.read(t) for t in tables}
    requests_before = mirror_server.total_requests
    result = ingested.cli("ingest", "--editions", "43,44,45")
    assert result.exit_code == 0, result.output
    assert mirror_server.total_requests == requests_before
    for table in tables:
        assert ingested.warehouse.read(table).equals(before[table]), table


def test_progress_line_per_edition(ingested: PipelineEnv) -> None:
    result = ingested.cli("ingest", "--editions", "43")
    assert "edition 43: 80 questions, 78 active, 2 annulled (1, 74)" in result.output


def test_unknown_edition_is_a_usage_error(ingested: PipelineEnv) -> None:
    result = ingested.cli("ingest", "--editions", "99")
    assert result.exit_code == 2
    assert "unknown edition(s) 99" in result.output


def test_a_mirror_folder_that_is_not_there_is_named_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's relative `../shared/oab/mirror`, run from a clone that is not beside `shared/`."""
    env = make_env(tmp_path, monkeypatch, "../shared/oab/mirror")
    monkeypatch.chdir(tmp_path)  # tmp_path/../shared does not exist
    result = env.cli("ingest", "--editions", "44")
    assert result.exit_code == 1
    assert result.output.startswith("Error: OABENCH_SOURCE_BASE_URL=../shared/oab/mirror: no such folder (")
    assert str((tmp_path / "../shared/oab/mirror").resolve()) in result.output
    assert "Traceback" not in result.output and "STEP_FAILURE" not in result.output
    assert not env.warehouse.has_table("questions")  # nothing half-written

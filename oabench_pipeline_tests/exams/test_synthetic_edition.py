"""A fabricated 46th edition ingests end to end: the pipeline is not tied to the three real files.

The booklet and answer key are generated with pymupdf in the real layout, served by the loopback mirror
under made-up official URLs and pinned by their SHA-256 in an editions registry that extends the packaged
one, exactly as a maintainer would add a new edition by hand.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import polars as pl
import pytest

from oabench_pipeline.core.editions import DEFAULT_EDITIONS_FILE
from oabench_pipeline_tests.core.synthetic_pdfs import (
    answer_letters,
    make_answer_key_pdf,
    make_booklet_pdf,
    sample_questions,
)
from oabench_pipeline_tests.pipeline_env import PipelineEnv, make_env
from oabench_pipeline_tests.servers.static_files import Override, StaticFileServer

EDITION = 46
ANNULLED = (7,)
BOOKLET_URL = "https://s.oab.org.br/arquivos/2030/04/synthetic-46-caderno-tipo-1.pdf"
KEY_URL = "https://s.oab.org.br/arquivos/2030/05/synthetic-46-gabarito-definitivo.pdf"


def _edition_block(booklet: bytes, key: bytes) -> str:
    """A registry entry in the packaged file's format, pinning the generated files."""
    return f"""
[[editions]]
edition = {EDITION}
exam_name = "{EDITION}º EXAME DE ORDEM UNIFICADO"
exam_date = 2030-04-07
exam_page_url = "https://examedeordem.oab.org.br/EditaisProvas?NumeroExame=99999"
area_scheme = "fgv-2025"

[editions.booklet]
label = "07/04/2030 - Caderno de Prova - Tipo 1"
url = "{BOOKLET_URL}"
sha256 = "{hashlib.sha256(booklet).hexdigest()}"
bytes = {len(booklet)}

[editions.answer_key]
label = "30/04/2030 - Gabaritos Definitivos - Prova Objetiva (1ª fase)"
url = "{KEY_URL}"
sha256 = "{hashlib.sha256(key).hexdigest()}"
bytes = {len(key)}
"""


def _path(url: str) -> str:
    return "/" + url.split("://", 1)[1].split("/", 1)[1]


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@pytest.fixture
def synthetic_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mirror_server: StaticFileServer
) -> tuple[PipelineEnv, bytes, dict[int, str | None]]:
    env = make_env(tmp_path, monkeypatch, mirror_server.base_url)
    booklet = make_booklet_pdf(EDITION, sample_questions(80))
    letters = answer_letters(80, annulled=ANNULLED, seed=EDITION)
    key = make_answer_key_pdf(EDITION, letters)
    monkeypatch.setitem(mirror_server.overrides, _path(BOOKLET_URL), Override(booklet))
    monkeypatch.setitem(mirror_server.overrides, _path(KEY_URL), Override(key))
    editions_file = tmp_path / "editions.toml"
    editions_file.write_text(
        DEFAULT_EDITIONS_FILE.read_text(encoding="utf-8") + _edition_block(booklet, key), encoding="utf-8"
    )
    env.set("OABENCH_EDITIONS_FILE", editions_file)
    return env, booklet, letters


def test_fabricated_edition_ingests_end_to_end(
    synthetic_env: tuple[PipelineEnv, bytes, dict[int, str | None]], mirror_server: StaticFileServer
) -> None:
    env, booklet, letters = synthetic_env
    before = {url: mirror_server.requests[_path(url)] for url in (BOOKLET_URL, KEY_URL)}

    result = env.cli("ingest", "--editions", str(EDITION))

    assert result.exit_code == 0, result.output
    assert f"edition {EDITION}: 80 questions, 79 active, 1 annulled (7)" in result.output
    assert {url: mirror_server.requests[_path(url)] - n for url, n in before.items()} == {
        BOOKLET_URL: 1,
        KEY_URL: 1,
    }

    keys = env.warehouse.read("answer_keys", str(EDITION)).sort("number")
    assert dict(zip(keys["number"].to_list(), keys["correct"].to_list(), strict=True)) == letters
    assert keys.filter(pl.col("status") == "annulled")["number"].to_list() == list(ANNULLED)

    questions = env.warehouse.read("questions", str(EDITION)).sort("number")
    expected = sample_questions(80)
    assert questions["qid"].to_list() == [f"oab-{EDITION}-1f-q{n}" for n in range(1, 81)]
    assert [_norm(s) for s in questions["stem"].to_list()] == [_norm(q.stem) for q in expected]
    assert questions["choice_d"].to_list() == [q.choices[3] for q in expected]
    assert questions.filter(pl.col("status") == "annulled")["number"].to_list() == list(ANNULLED)
    assert questions.row(by_predicate=pl.col("number") == 80, named=True)["area"] == "Processo do Trabalho"
    assert questions["source_sha256"].unique().to_list() == [hashlib.sha256(booklet).hexdigest()]
    # Only the asked-for edition was touched: the real ones were neither fetched nor written.
    assert env.warehouse.partitions("questions") == [str(EDITION)]

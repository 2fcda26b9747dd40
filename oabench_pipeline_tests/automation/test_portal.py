"""The portal parsers on pages shaped like the real portal, and discovery end to end on a loopback portal."""

from __future__ import annotations

import datetime as dt
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from oabench_pipeline.automation.discovery import (
    DEFAULT_PORTAL_URL,
    PORTAL_URL_ENV,
    AreaScheme,
    DiscoveryOutcome,
    PortalPolicy,
    discover_new_editions,
    portal_base_url,
    record_discovered_editions,
)
from oabench_pipeline.core.editions import load_editions
from oabench_pipeline.core.portal import (
    PortalLayoutError,
    edition_number,
    exam_list_url,
    normalize,
    parse_exam_list,
    parse_exam_page,
)
from oabench_pipeline.shared.raw_store import RawStore, sha256_of
from oabench_pipeline_tests.automation.portal_fixture import (
    BOOKLET_PATH,
    CHANGED_EXAM_PAGE,
    CHANGED_LIST_PAGE,
    DEFINITIVE_KEY_PATH,
    KNOWN_EXAMS,
    NEW_EXAM_ID,
    NEW_EXAM_NAME,
    PRELIMINARY_KEY_PATH,
    PortalFixture,
    known_exam_page,
    list_page,
    new_edition_pdfs,
    new_exam_page,
    sha256_hex,
)

BASE = "https://examedeordem.oab.org.br"
KNOWN = {43, 44, 45}
REGISTRY = load_editions()
SCHEME = AreaScheme.of(REGISTRY[-1])


@pytest.fixture
def portal() -> Iterator[PortalFixture]:
    with PortalFixture() as server:
        yield server


def discover(portal: PortalFixture, store: RawStore, **kwargs) -> DiscoveryOutcome:
    return discover_new_editions(portal.base_url, set(KNOWN), store, SCHEME, **kwargs)


# --- parsers -------------------------------------------------------------------------------------------


def test_exam_list_gives_edition_exam_id_and_page_url() -> None:
    exams = [*KNOWN_EXAMS, (46, NEW_EXAM_ID, NEW_EXAM_NAME)]
    listings = parse_exam_list(list_page(exams), exam_list_url(BASE))
    by_edition = {item.edition: item for item in listings}
    assert [item.edition for item in listings] == [
        35,
        41,
        42,
        43,
        44,
        45,
        46,
    ]  # "XXXV" is Roman, prompt dropped
    assert by_edition[45].exam_id == "17431"
    assert by_edition[45].name == "45º EXAME DE ORDEM UNIFICADO"
    assert by_edition[45].page_url == f"{BASE}/EditaisProvas?NumeroExame=17431"
    assert by_edition[46].page_url == f"{BASE}/EditaisProvas?NumeroExame={NEW_EXAM_ID}"


def test_exam_list_without_the_select_is_a_layout_error() -> None:
    with pytest.raises(PortalLayoutError, match="cmb-edital"):
        parse_exam_list(CHANGED_LIST_PAGE, exam_list_url(BASE))


def test_exam_list_with_no_exam_in_the_select_is_a_layout_error() -> None:
    with pytest.raises(PortalLayoutError, match="lists no exam"):
        parse_exam_list('<select id="cmb-edital"><option value="0">Selecione</option></select>', BASE)


def test_exam_page_picks_the_first_phase_tipo_1_booklet_and_both_keys() -> None:
    page_url = f"{BASE}/EditaisProvas?NumeroExame={NEW_EXAM_ID}"
    files = parse_exam_page(new_exam_page("http://files.example", with_definitive_key=True), page_url)
    assert (
        files.booklet is not None and files.definitive_key is not None and files.preliminary_key is not None
    )
    # Tipo 2 comes first and a large-print Tipo 1 too; the 2nd phase also has a "Tipo 1" booklet.
    assert files.booklet.label == "12/04/2026 - Caderno de Prova - Tipo 1"
    assert files.booklet.url == f"{BASE}{BOOKLET_PATH}"  # relative href resolved against the page
    assert files.definitive_key.url == f"http://files.example{DEFINITIVE_KEY_PATH}"  # absolute href kept
    assert files.definitive_key.label == "05/05/2026 - Gabaritos Definitivos - Prova Objetiva (1ª fase)"
    assert files.definitive_key.date == dt.date(2026, 5, 5)
    assert files.preliminary_key.url == f"http://files.example{PRELIMINARY_KEY_PATH}"
    assert files.exam_date == dt.date(2026, 4, 12)
    assert files.complete


def test_exam_page_with_only_a_preliminary_key_is_not_complete() -> None:
    files = parse_exam_page(new_exam_page("http://x", with_definitive_key=False), f"{BASE}/EditaisProvas")
    assert files.booklet is not None
    assert files.definitive_key is None
    assert files.preliminary_key is not None and "Preliminar" in files.preliminary_key.label
    assert not files.complete


def test_known_exam_page_reads_the_real_label_shapes() -> None:
    files = parse_exam_page(
        known_exam_page(45, "17431", "45º EXAME"), f"{BASE}/EditaisProvas?NumeroExame=17431"
    )
    assert files.booklet is not None and files.booklet.url == "https://s.oab.org.br/arquivos/17431-tipo1.pdf"
    assert files.definitive_key is not None and files.definitive_key.url.endswith("/a/def.pdf")
    assert files.preliminary_key is not None and files.preliminary_key.url.endswith("/a/pre.pdf")


def test_heading_matching_ignores_case_and_accents() -> None:
    html = """<h3>PROVA OBJETIVA - 1a FASE</h3><table><tr><td>
    <a href="/b.pdf">21/12/2025 - CADERNO DE PROVA - TIPO 1</a></td><td>
    <a href="/k.pdf">19/01/2026 - Gabaritos Definitivos</a></td></tr></table>"""
    files = parse_exam_page(html, f"{BASE}/EditaisProvas?NumeroExame=1")
    assert files.booklet is not None and files.booklet.url == f"{BASE}/b.pdf"
    assert files.definitive_key is not None and files.definitive_key.url == f"{BASE}/k.pdf"
    assert normalize("1ª Fase — Prova  Objetiva") == normalize("1a fase — PROVA OBJETIVA")


def test_a_second_phase_table_alone_is_a_layout_error() -> None:
    html = '<h4>2ª Fase (Prova Prático-Profissional)</h4><table><tr><td><a href="/x.pdf">Caderno de Prova - Tipo 1</a></td></tr></table>'
    with pytest.raises(PortalLayoutError, match="1ª fase"):
        parse_exam_page(html, BASE)
    with pytest.raises(PortalLayoutError, match="no table headed"):
        parse_exam_page(CHANGED_EXAM_PAGE, BASE)


def test_edition_numbers_from_names() -> None:
    assert edition_number("46º EXAME DE ORDEM UNIFICADO") == 46
    assert edition_number("XXXIX EXAME DE ORDEM UNIFICADO") == 39
    assert edition_number("Selecione o exame") is None


def test_portal_url_setting() -> None:
    assert portal_base_url({}) == DEFAULT_PORTAL_URL
    assert portal_base_url({PORTAL_URL_ENV: "http://127.0.0.1:9"}) == "http://127.0.0.1:9"


# --- discovery against the loopback portal ---------------------------------------------------------------


def test_nothing_new_while_the_portal_lists_only_known_editions(
    portal: PortalFixture, tmp_path: Path
) -> None:
    outcome = discover(portal, RawStore(tmp_path / "raw"))
    assert outcome.found == () and outcome.waiting == () and outcome.error is None
    assert "no new edition" in outcome.summary()
    # Old editions (41, 42, XXXV) are on the portal but older than the known ones: their pages are not fetched.
    assert set(portal.requests) == {"/EditaisProvas?NumeroExame=0"}


def test_a_complete_new_edition_is_pinned_on_first_download(portal: PortalFixture, tmp_path: Path) -> None:
    portal.state = "definitive"
    store = RawStore(tmp_path / "raw")
    outcome = discover(portal, store)
    assert outcome.error is None and outcome.skipped == () and outcome.waiting == ()
    [edition] = outcome.found
    served = new_edition_pdfs()
    assert edition.edition == 46 and edition.pinned_by == "first-download"
    assert edition.exam_date == dt.date(2026, 4, 12)
    assert edition.exam_page_url == f"{portal.base_url}/EditaisProvas?NumeroExame={NEW_EXAM_ID}"
    assert edition.booklet.url == f"{portal.base_url}{BOOKLET_PATH}"
    assert edition.booklet.sha256 == sha256_hex(served[BOOKLET_PATH])
    assert edition.booklet.bytes == len(served[BOOKLET_PATH])
    assert edition.answer_key.sha256 == sha256_hex(served[DEFINITIVE_KEY_PATH])
    assert edition.area_scheme == REGISTRY[-1].area_scheme and edition.areas == REGISTRY[-1].areas
    for pinned in (edition.booklet, edition.answer_key):
        stored = store.verified_path(pinned.sha256)
        assert stored is not None and sha256_of(stored) == pinned.sha256
    assert not list(store.root.glob(".incoming-*"))  # no staging file left behind


def test_an_edition_with_only_a_preliminary_key_waits(portal: PortalFixture, tmp_path: Path) -> None:
    portal.state = "preliminary"
    store = RawStore(tmp_path / "raw")
    outcome = discover(portal, store)
    assert outcome.found == ()
    assert [(p.edition, "preliminary" in p.reason) for p in outcome.waiting] == [(46, True)]
    assert not store.root.exists() or not any(store.root.iterdir())  # nothing downloaded
    assert portal.requests[PRELIMINARY_KEY_PATH] == 0


@pytest.mark.parametrize(
    ("state", "expected"), [("down", "HTTP 500"), ("changed_layout", "no <select id='cmb-edital'>")]
)
def test_a_portal_problem_fails_the_whole_check_with_a_reason(
    portal: PortalFixture, tmp_path: Path, state: str, expected: str
) -> None:
    portal.state = state  # type: ignore[assignment]
    outcome = discover(portal, RawStore(tmp_path / "raw"))
    assert outcome.found == () and outcome.error is not None and expected in outcome.error
    assert outcome.summary().startswith("portal check failed")


def test_a_pdf_link_serving_html_skips_the_edition(portal: PortalFixture, tmp_path: Path) -> None:
    portal.state = "definitive"
    portal.broken_paths = {DEFINITIVE_KEY_PATH}
    outcome = discover(portal, RawStore(tmp_path / "raw"))
    assert outcome.found == ()
    [skipped] = outcome.skipped
    assert (
        skipped.edition == 46 and "an HTML page" in skipped.reason and DEFINITIVE_KEY_PATH in skipped.reason
    )


def test_an_unreachable_portal_is_a_reason_not_an_exception(tmp_path: Path) -> None:
    with PortalFixture() as server:
        url = server.base_url  # a port nobody listens on once the server is closed
    policy = PortalPolicy(connect_timeout_s=1.0, read_timeout_s=1.0)
    outcome = discover_new_editions(url, set(KNOWN), RawStore(tmp_path), SCHEME, policy=policy)
    assert outcome.error is not None and "ConnectError" in outcome.error


def test_only_newer_editions_are_candidates(portal: PortalFixture, tmp_path: Path) -> None:
    portal.state = "definitive"
    outcome = discover_new_editions(portal.base_url, {43, 44, 45, 46}, RawStore(tmp_path), SCHEME)
    assert outcome.found == () and outcome.listed[-1] == 46


# --- recording ----------------------------------------------------------------------------------------


def test_recording_appends_atomically_and_keeps_existing_entries(
    portal: PortalFixture, tmp_path: Path
) -> None:
    portal.state = "definitive"
    path = tmp_path / "warehouse" / "discovered_editions.toml"
    [edition] = discover(portal, RawStore(tmp_path / "raw")).found
    assert record_discovered_editions(path, [edition]) == [edition]
    # A second discovery of the same edition (re-served bytes) never re-pins it.
    other = edition.model_copy(update={"booklet": edition.booklet.model_copy(update={"sha256": "0" * 64})})
    assert record_discovered_editions(path, [other]) == []
    later = edition.model_copy(update={"edition": 47, "exam_name": "47º EXAME DE ORDEM UNIFICADO"})
    assert record_discovered_editions(path, [later]) == [later]
    loaded = load_editions(path)
    assert [e.edition for e in loaded] == [46, 47]
    assert loaded[0] == edition  # round-trips exactly, areas and pin included
    assert "area_schemes" in tomllib.loads(path.read_text(encoding="utf-8"))  # self-contained
    assert [p.name for p in path.parent.iterdir()] == ["discovered_editions.toml"]  # no temp file left

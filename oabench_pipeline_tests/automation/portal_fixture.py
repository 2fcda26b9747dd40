"""A loopback stand-in for the OAB exam portal, with a fabricated 46th edition that can appear on cue.

The pages follow the structure of `https://examedeordem.oab.org.br`: a list page whose
`<select id="cmb-edital">` names every exam, and one page per exam with a documents table per phase
(1st phase prova objetiva, 2nd phase prova prático-profissional), booklets of types 1 to 4, answer keys.
Links mix absolute hrefs (to the official file host, as the real pages do) and relative ones (to this
server), so URL resolution is exercised. The 46th edition's PDFs are built with `synthetic_pdfs` in the
real layout and served by this server.

`PortalFixture.state` switches what the portal shows:
- "known": only editions 41-45 (43-45 are the registry's);
- "preliminary": the 46th is listed with its booklet and only a preliminary answer key;
- "definitive": the 46th also has its definitive answer key;
- "down": every request answers HTTP 500;
- "changed_layout": the pages no longer have the exam select nor a 1st-phase table.
`broken_paths` makes single paths answer an HTML error page with status 200 (a PDF link gone bad).
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from oabench_pipeline_tests.core.synthetic_pdfs import (
    answer_letters,
    make_answer_key_pdf,
    make_booklet_pdf,
    sample_questions,
)

PortalState = Literal["known", "preliminary", "definitive", "down", "changed_layout"]

NEW_EDITION = 46
NEW_EXAM_ID = "17802"
NEW_EXAM_NAME = "46º EXAME DE ORDEM UNIFICADO"
NEW_EXAM_DATE = "12/04/2026"
BOOKLET_PATH = "/arquivos/2026/04/7a1c6f0e-46aa-4b1e-9d1f-booklet-tipo1.pdf"
DEFINITIVE_KEY_PATH = "/arquivos/2026/05/0e2b9d43-46aa-4c55-8f0a-gabarito-definitivo.pdf"
PRELIMINARY_KEY_PATH = "/arquivos/2026/04/5f3e1a77-46aa-4f10-a2b4-gabarito-preliminar.pdf"

# (edition, exam id, name) of the exams already on the portal; 43-45 ids are the real ones.
KNOWN_EXAMS: tuple[tuple[int, str, str], ...] = (
    (41, "16201", "41º EXAME DE ORDEM UNIFICADO"),
    (42, "16488", "42º EXAME DE ORDEM UNIFICADO"),
    (43, "16773", "43º EXAME DE ORDEM UNIFICADO"),
    (44, "17000", "44º EXAME DE ORDEM UNIFICADO"),
    (45, "17431", "45º EXAME DE ORDEM UNIFICADO"),
)


@functools.cache
def new_edition_pdfs() -> dict[str, bytes]:
    """The 46th edition's files by path, built once per test session (pymupdf takes a second)."""
    booklet = make_booklet_pdf(NEW_EDITION, sample_questions())
    definitive = make_answer_key_pdf(NEW_EDITION, answer_letters(annulled=[7], seed=46))
    preliminary = make_answer_key_pdf(NEW_EDITION, answer_letters(seed=46))
    return {BOOKLET_PATH: booklet, DEFINITIVE_KEY_PATH: definitive, PRELIMINARY_KEY_PATH: preliminary}


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------------------
# Pages
# ---------------------------------------------------------------------------------------------------------

_PAGE = """<!DOCTYPE html>
<html lang="pt-br"><head><meta charset="utf-8"><title>Exame de Ordem - Editais e Provas</title></head>
<body>
<nav><ul><li><a href="/">Início</a></li><li><a href="/EditaisProvas?NumeroExame=0">Editais e Provas</a></li>
<li><a href="/Resultados">Resultados</a></li></ul></nav>
<div class="container">{body}</div>
<footer><p>Conselho Federal da OAB - 1ª fase, 2ª fase: consulte o edital.</p></footer>
</body></html>
"""


def list_page(exams: list[tuple[int, str, str]]) -> str:
    """The exam list: newest first, as a real select would show them, after a "Selecione" prompt."""
    options = "\n".join(
        f'    <option value="{exam_id}">{name}</option>' for _, exam_id, name in sorted(exams, reverse=True)
    )
    body = f"""
<h2>Editais e Provas</h2>
<form method="get" action="EditaisProvas">
  <label for="cmb-edital">Exame</label>
  <select id="cmb-edital" name="NumeroExame" class="form-control">
    <option value="0">Selecione o exame</option>
{options}
    <option value="9001">XXXV EXAME DE ORDEM UNIFICADO</option>
  </select>
</form>"""
    return _PAGE.format(body=body)


def _rows(links: list[tuple[str, str]]) -> str:
    return "\n".join(
        f'    <tr><td><a href="{href}" target="_blank">{label}</a></td><td>PDF</td></tr>'
        for label, href in links
    )


def exam_page(name: str, first_phase: list[tuple[str, str]], second_phase: list[tuple[str, str]]) -> str:
    """An exam page: the edital table, then the 1st and 2nd phase tables, each under its own heading."""
    body = f"""
<h2>{name}</h2>
<h4>Editais</h4>
<table class="table">
  <tbody>
    <tr><td><a href="https://s.oab.org.br/arquivos/edital.pdf">Edital de abertura</a></td><td>PDF</td></tr>
  </tbody>
</table>
<h4>Provas e Gabaritos - <strong>1ª FASE</strong> (Prova Objetiva)</h4>
<table class="table table-striped">
  <thead><tr><th>Documento</th><th>Formato</th></tr></thead>
  <tbody>
{_rows(first_phase)}
  </tbody>
</table>
<h4>Provas e Gabaritos - 2ª Fase (Prova Prático-Profissional)</h4>
<table class="table table-striped">
  <thead><tr><th>Documento</th><th>Formato</th></tr></thead>
  <tbody>
{_rows(second_phase)}
  </tbody>
</table>"""
    return _PAGE.format(body=body)


def _second_phase(date: str) -> list[tuple[str, str]]:
    # A 2nd phase booklet also says "Caderno de Prova": only the 1st phase table may be read.
    return [
        (
            f"{date} - Caderno de Prova - Direito Civil - Tipo 1",
            "https://s.oab.org.br/arquivos/2fase-civil.pdf",
        ),
        (
            f"{date} - Padrão de Respostas Definitivo - Gabarito",
            "https://s.oab.org.br/arquivos/2fase-padrao.pdf",
        ),
    ]


def known_exam_page(edition: int, exam_id: str, name: str) -> str:
    """A complete page for an already-known exam: all four booklet types and both keys (absolute hrefs)."""
    date = "27/04/2025"
    first = [
        (f"{date} - Caderno de Prova - Tipo {t}", f"https://s.oab.org.br/arquivos/{exam_id}-tipo{t}.pdf")
        for t in (2, 1, 3, 4)
    ]
    first += [
        ("05/05/2025 - Gabaritos Preliminares - Prova Objetiva (1ª fase)", "https://s.oab.org.br/a/pre.pdf"),
        ("14/05/2025 - Gabaritos Definitivos - Prova Objetiva (1ª fase)", "https://s.oab.org.br/a/def.pdf"),
    ]
    return exam_page(name, first, _second_phase("15/06/2025"))


def new_exam_page(base_url: str, with_definitive_key: bool) -> str:
    """The 46th exam's page: the Tipo 1 booklet by a relative href, the keys by absolute ones."""
    first = [
        (f"{NEW_EXAM_DATE} - Caderno de Prova - Tipo 2", "/arquivos/2026/04/tipo2.pdf"),
        (f"{NEW_EXAM_DATE} - Caderno de Prova - Tipo 1 (Ampliada)", "/arquivos/2026/04/tipo1-ampliada.pdf"),
        (f"{NEW_EXAM_DATE} - Caderno de Prova - Tipo 1", BOOKLET_PATH.lstrip("/")),
        (f"{NEW_EXAM_DATE} - Caderno de Prova - Tipo 3", "/arquivos/2026/04/tipo3.pdf"),
        (f"{NEW_EXAM_DATE} - Caderno de Prova - Tipo 4", "/arquivos/2026/04/tipo4.pdf"),
        ("13/04/2026 - Gabarito Preliminar - Prova Objetiva (1ª fase)", f"{base_url}{PRELIMINARY_KEY_PATH}"),
    ]
    if with_definitive_key:
        first.append(
            (
                "05/05/2026 - Gabaritos Definitivos - Prova Objetiva (1ª fase)",
                f"{base_url}{DEFINITIVE_KEY_PATH}",
            )
        )
    return exam_page(NEW_EXAM_NAME, first, _second_phase("07/06/2026"))


CHANGED_LIST_PAGE = _PAGE.format(
    body='<h2>Editais e Provas</h2><ul class="exames"><li><a href="/Exame/46">46º Exame</a></li></ul>'
)
CHANGED_EXAM_PAGE = _PAGE.format(
    body='<h2>46º EXAME</h2><div class="documentos"><a href="/arquivos/x.pdf">Caderno de Prova - Tipo 1</a></div>'
)
ERROR_PAGE = "<html><body><h1>Erro</h1><p>O arquivo solicitado não está disponível.</p></body></html>"


# ---------------------------------------------------------------------------------------------------------
# Server
# ---------------------------------------------------------------------------------------------------------


@dataclass
class PortalFixture:
    """The fake portal on 127.0.0.1:<ephemeral port>; `requests` counts GETs per path (query included)."""

    state: PortalState = "known"
    broken_paths: set[str] = field(default_factory=set)
    requests: Counter[str] = field(default_factory=Counter)
    _server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def pdf(self, path: str) -> bytes:
        return new_edition_pdfs()[path]

    def respond(self, raw_path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for a request path in the current state."""
        parts = urlsplit(raw_path)
        if self.state == "down":
            return 500, "text/html; charset=utf-8", b"<html><body>Internal Server Error</body></html>"
        if parts.path in self.broken_paths:
            return 200, "text/html; charset=utf-8", ERROR_PAGE.encode()
        if parts.path in new_edition_pdfs():
            return 200, "application/pdf", self.pdf(parts.path)
        if parts.path.rstrip("/").endswith("/EditaisProvas"):
            exam_id = parse_qs(parts.query).get("NumeroExame", ["0"])[0]
            page = self._page(exam_id)
            if page is not None:
                return 200, "text/html; charset=utf-8", page.encode()
        return 404, "text/html; charset=utf-8", b"<html><body>Not Found</body></html>"

    def _exams(self) -> list[tuple[int, str, str]]:
        exams = list(KNOWN_EXAMS)
        if self.state in ("preliminary", "definitive"):
            exams.append((NEW_EDITION, NEW_EXAM_ID, NEW_EXAM_NAME))
        return exams

    def _page(self, exam_id: str) -> str | None:
        if self.state == "changed_layout":
            return CHANGED_LIST_PAGE if exam_id == "0" else CHANGED_EXAM_PAGE
        if exam_id == "0":
            return list_page(self._exams())
        for edition, known_id, name in self._exams():
            if exam_id == known_id:
                if edition == NEW_EDITION:
                    return new_exam_page(self.base_url, with_definitive_key=self.state == "definitive")
                return known_exam_page(edition, known_id, name)
        return None

    def __enter__(self) -> PortalFixture:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests[self.path] += 1
                status, content_type, body = owner.respond(self.path)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

"""parse_booklet on one real booklet of each older layout, checked by eye against the rendered
pages, and on layouts it must refuse. Each real booklet is parsed once per session.

The layouts (`core/booklet_layouts.py`), with the booklet tested here for each:
- CESPE 2010.1 (1st edition): `QUESTÃO N` labels, circled-letter choices, 100 questions;
- FGV 2010.2 (2nd): `01` beside the item code `A00413`, split ligatures, 100 questions;
- FGV 2010.3-2011 (3rd): bold bare numbers, `(A)`, running footer `... 2010.3 – TIPO 1 – BRANCO`;
- FGV roman footer with `Questão N` and `A)` (16th, with the doubled text layer; and five pages
  of the 11th, with a ligature glyph its font maps to no Unicode);
- FGV roman footer with bold numbers and `A)` (37th; and the 36th's page 13, whose question 46 opens
  in the header band, where a bare number is no page number);
- FGV roman header `XXXVIII EXAME DO ORDEM UNIFICADO` with bold numbers, `(A)` and some `A)`, its page
  number on a footer row of its own from page 10 (38th).
Every archived edition is parsed by `test_booklet_archive.py` (marker `archive`).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from oabench_pipeline.core import booklet
from oabench_pipeline.core.booklet import BookletParseError, parse_booklet
from oabench_pipeline.core.exam_validation import header_footer_leaks, swallowed_choices
from oabench_pipeline.core.records import ParsedBooklet, ParsedQuestion
from oabench_pipeline_tests.conftest import shared_oab_dir
from oabench_pipeline_tests.core.test_booklet import FIELDS, norm

LAYOUT_EDITIONS = (1, 2, 3, 16, 37, 38)


@cache
def archive_entry(edition: int) -> dict[str, Any]:
    manifest = json.loads((shared_oab_dir() / "archive-manifest.json").read_text(encoding="utf-8"))
    return next(e for e in manifest["editions"] if e["edition"] == edition)


def archive_pdf(edition: int) -> bytes:
    return (shared_oab_dir() / archive_entry(edition)["booklet"]["file"]).read_bytes()


@cache
def archive_booklet(edition: int) -> ParsedBooklet:
    """Parsed once per session, with the question count the manifest gives."""
    return parse_booklet(archive_pdf(edition), question_count=archive_entry(edition)["questions"])


def question(edition: int, number: int) -> ParsedQuestion:
    return archive_booklet(edition).questions[number - 1]


@pytest.mark.parametrize("edition", LAYOUT_EDITIONS)
def test_each_layout_gives_every_question_whole(edition: int, shared_oab: Path) -> None:
    booklet = archive_booklet(edition)
    count = archive_entry(edition)["questions"]
    assert count == (100 if edition <= 3 else 80)
    assert booklet.edition_in_header == edition
    assert [q.number for q in booklet.questions] == list(range(1, count + 1))
    for q in booklet.questions:
        assert all(getattr(q, name).strip() for name in FIELDS), q.number
        assert len(q.pages) == 1  # checked on all 33: no question leaves its column
    assert header_footer_leaks(booklet.questions) == []
    assert swallowed_choices(booklet.questions) == []
    # No question of the 33 booklets holds a picture (only covers and questionnaires do); the
    # black `Questão N` labels of the 1st and 10th-25th editions are not pictures.
    assert not any(q.requires_image for q in booklet.questions)


# (edition, number, pages, [(beginning, end) of stem, A, B, C, D]), whitespace normalised; each
# checked by eye against the page rendered with pymupdf at 75 dpi.
SPOT_CHECKS: list[tuple[Any, ...]] = [
    (
        1,
        1,
        [2],
        (
            "Júlio e Lauro constituíram o mesmo advogado para, juntos,",
            "Nessa situação hipotética, deve o advogado",
        ),
        (
            "optar, com prudência e discernimento,",
            "e renunciar ao outro, resguardando o sigilo profissional.",
        ),
        (
            "manter com os constituintes contrato",
            "no interesse da causa, resguardando o sigilo profissional.",
        ),
        ("assumir, com a cautela que lhe é peculiar,", "o patrocínio de ambos, em ações individuais."),
        (
            "designar, com prudência e cautela,",
            "por substabelecimento com reservas, um advogado de sua confiança.",
        ),
    ),
    (
        1,
        93,
        [15],
        (
            "Maurício foi denunciado pela prática do delito de estelionato perante a 1.ª Vara",
            "caberá recurso",
        ),
        ("ordinário constitucional ao STJ.", "ordinário constitucional ao STJ."),
        ("ordinário constitucional ao STF.", "ordinário constitucional ao STF."),
        (
            "especial ao STJ e(ou) recurso extraordinário ao STF,",
            "conforme o teor da fundamentação do acórdão.",
        ),
        ("de embargos infringentes e de nulidade", "ao grupo criminal competente do TJ/MG."),
    ),
    (
        1,
        100,
        [16],
        ("Assinale a opção correta no que se refere", "à família substituta."),
        (
            "A colocação em família substituta ocorrerá mediante",
            "pelo juiz da vara da infância e da adolescência.",
        ),
        ("Sempre que possível, a criança ou adolescente", "a sua opinião, devidamente considerada."),
        ("Na apreciação do pedido de adoção,", "a certidão de bons antecedentes da família substituta."),
        ("Não se deferirá a colocação da criança", "limitações em sua capacidade laborativa."),
    ),
    (
        2,
        6,
        [3],
        (
            "Sabe-se a polêmica ainda existente na doutrina constitucionalista pátria",
            "a afirmativa incorreta.",
        ),
        ("A Lei Complementar exige aprovação por maioria absoluta,", "de cada Casa ou de suas Comissões."),
        ("As matérias que devem ser regradas por Lei Complementar", "competirá à lei ordinária."),
        ("As matérias reservadas à Lei Complementar", "ao Presidente da República."),
        ("A discussão e votação dos projetos de lei ordinária", "ter início na Câmara dos Deputados."),
    ),
    (
        2,
        100,
        [18],
        ("Nas ações coletivas,", "o efeito da coisa julgada material será:"),
        ("Tratando-se de direitos individuais homogêneos, efeito erga omnes,", "até o trânsito em julgado."),
        ("Tratando-se de direitos individuais homogêneos, julgados", "não poderá intentar ação individual."),
        ("Tratando-se de direitos difusos,", "valendo-se de novas provas."),
        ("Tratando-se de direitos coletivos,", "impede a propositura de ação individual."),
    ),
    (
        3,
        1,
        [3],
        ("O prefeito de um determinado município resolve,", "qual deve ser a providência tomada?"),
        (
            "Ingressar com ação judicial, com pedido de liminar",
            "aos princípios que regem a Administração Pública.",
        ),
        ("Ingressar com ação judicial, com pedido de indenização", "de ordem financeira causados."),
        ("Nenhuma medida merece ser tomada na hipótese,", "é a modificação unilateral das suas cláusulas."),
        (
            "Ingressar com ação judicial, com pedido para que",
            "também sejam extensivos às três empresas clientes.",
        ),
    ),
    (
        3,
        56,
        [12],
        ("Guiando o seu automóvel na contramão de direção,", "o promotor de justiça deverá denunciar Tício"),
        ("pela prática dos crimes de embriaguez ao volante", "e direção sem habilitação"),
        ("apenas pelo crime de embriaguez ao volante,", "constitui mera infração administrativa."),
        (
            "apenas pelo crime de direção sem habilitação, uma vez",
            "em razão da aplicação do Princípio da Consunção.",
        ),
        ("apenas pelo crime de direção sem habilitação, pois", "ocorre acidente de trânsito com vítima."),
    ),
    (
        16,
        7,
        [3],
        (
            "O advogado Antônio participava do julgamento de recurso de apelação",
            "assinale a afirmativa correta.",
        ),
        ("Não é permitido o uso da palavra", "em julgamentos de recursos de apelação."),
        (
            "É direito do advogado usar da palavra, pela ordem,",
            "para replicar acusação ou censura que lhe forem feitas.",
        ),
        ("É direito do advogado intervir, a qualquer tempo", "de processos em que esteja constituído."),
        ("O uso da palavra, pela ordem,", "somente é permitido para o esclarecimento de questões fáticas."),
    ),
    (
        16,
        80,
        [22],
        ("No momento em que a sociedade empresária estava fazendo", "assinale a afirmativa correta."),
        ("A diferença é ínfima e deve ser desprezada,", "não prejudicando a apreciação imediata do recurso."),
        ("Apesar de pequena, a diferença existe,", "sob pena de deserção."),
        ("O recurso não será conhecido por deserto,", "mesmo que a diferença seja de pequeno valor."),
        ("Não havendo nenhuma disciplina a respeito,", "determinar o que deve ser feito."),
    ),
    (
        37,
        1,
        [3],
        ("Foi instaurado processo disciplinar em face do advogado Nino,", "assinale a afirmativa correta."),
        (
            "A notificação inicial de Nino para apresentação",
            "Regulamento Geral do Estatuto da Advocacia e da OAB .",
        ),
        ("Na hipótese de a notificação inicial", "no feito disciplinar no prazo legal."),
        ("As notificações realizadas no referido processo disicplinar", "atuação em causa própria."),
        ("Há presunção de recebimento das notificações", "de Nino junto ao Conselho Seccional."),
    ),
    (
        37,
        80,
        [22],
        ("Uma sociedade empresária de grande porte,", "de acordo com a CLT, assinale a afirmativa correta."),
        ("Nas ações rescisórias, não há custas no depósito prévio.", "não há custas no depósito prévio."),
        (
            "A sociedade empresária sujeita-se ao depósito prévio",
            "de 20% (vinte por cento) do valor da causa.",
        ),
        ("Não haverá necessidade de qualquer preparo porque,", "não cabe ação rescisória."),
        ("Devem ser recolhidas custas no importe", "de 2% sobre o valor da condenação."),
    ),
    (
        36,
        46,
        [13],
        ("Cerâmica Água Doce do Norte teve sua", "nas informações acima, a sociedade empresária"),
        ("tinha a faculdade de pleitear sua recuperação", "manifestado pela efetivação de depósito elisivo."),
        (
            "não deveria ter requerido sua recuperação judicial",
            "após esse ato, pleitear recuperação judicial.",
        ),
        ("deveria ter pleiteado sua recuperação judicial, pois", "o pedido foi tempestivo e correto."),
        ("estava impedida de requerer recuperação judicial, pois", "si, ajuizado pelo credor da duplicatas."),
    ),
    (
        38,
        2,
        [3],
        ("A medida cautelar de busca e apreensão", "hipotética narrada, assinale a afirmativa correta."),
        ("É dever do representante da OAB presente", "sigilo através da cadeia de custódia."),
        ("A análise dos documentos apreendidos deve ser", "mínima e impreterível de 48 horas."),
        ("Caso seja essencial à sua defesa no", "imputações por outros meios de prova."),
        ("É direito de José estar presente na", "do mandado de busca e apreensão."),
    ),
    (
        38,
        33,
        [10],
        ("No ano corrente, o Ministério Público ajuizou", "nº 8.429/92, assinale a afirmativa correta."),
        ("Revela-se pertinente o ajuizamento de ambas as", "ou para outra pessoa ou entidade."),
        ("A ação ajuizada em desfavor de Carlos", "prática caracteriza ato de improbidade administrativa."),
        ("Apenas é pertinente a ação ajuizada em", "de caracterizar ato de improbidade administrativa."),
        ("Ambas as ações são despropositadas, pois, além", "não ocorreu em nenhum dos casos."),
    ),
]


@pytest.mark.parametrize("spot", SPOT_CHECKS, ids=lambda s: f"{s[0]}-q{s[1]}")
def test_spot_checked_questions(spot: tuple[Any, ...], shared_oab: Path) -> None:
    edition, number, pages, *expected = spot
    q = question(edition, number)
    assert q.pages == pages
    for name, (head, tail) in zip(FIELDS, expected, strict=True):
        text = norm(getattr(q, name))
        assert text.startswith(head), (name, text[:80])
        assert text.endswith(tail), (name, text[-80:])


def test_doubled_text_layer_is_read_once(shared_oab: Path) -> None:
    """16th edition: two text layers meet mid-line and repeat the glyph at the seam
    (`julgame` + `ento`, `d` + `de`, `qu` + `uando`); each glyph is kept once."""
    assert "participava do julgamento de recurso" in question(16, 7).stem
    assert "acusou o advogado Antônio de ter atuado de forma antiética" in question(16, 7).stem
    assert question(16, 60).stem.startswith("Patrício e Luiz estavam em um bar, quando o primeiro")
    fields = [getattr(q, name) for q in archive_booklet(16).questions for name in FIELDS]
    assert not any(word in text for text in fields for word in ("julgameento", "dde forma", "quuando"))


def test_split_ligatures_are_joined_and_spelled_out(shared_oab: Path) -> None:
    """2nd edition: the `ti` and `fi` ligatures come with a space drawn back inside them."""
    assert "doutrina constitucionalista pátria" in question(2, 6).stem
    assert "assinale a afirmativa incorreta." in question(2, 6).stem
    assert question(2, 9).choice_a.startswith("A sua eficácia dura sessenta dias")
    fields = [getattr(q, name) for q in archive_booklet(2).questions for name in FIELDS]
    assert not any(char in text for text in fields for char in "\ufb00\ufb01\ufb02\ufb03\ufb04")
    assert not any(" ti " in text or "consti tu" in text for text in fields)


@cache
def eleventh_pages_2_to_6() -> bytes:
    """Pages 2-6 of the 11th edition's booklet (questions 1-23), without the cover's picture."""
    with pymupdf.open(stream=archive_pdf(11)) as doc:
        doc.select(range(1, 6))
        return doc.tobytes(garbage=3)


def test_a_ligature_glyph_without_unicode_is_spelled_from_its_font(shared_oab: Path) -> None:
    """11th edition, q20 (D): Calibri's `ti` ligature, which the PDF maps to no Unicode (pymupdf's
    character-code fallback read it "V": `invesVgação`), is spelled by its glyph id."""
    questions = parse_booklet(eleventh_pages_2_to_6(), question_count=23).questions
    assert questions[19].choice_d.startswith("a investigação e a punição dos responsáveis pela violação,")
    fields = [getattr(q, name) for q in questions for name in FIELDS]
    assert not any(re.search(r"[a-zà-ú]V[a-zà-ú]", text) for text in fields)


def test_a_glyph_without_unicode_that_is_no_known_ligature_is_refused(
    shared_oab: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rather than a question with a hole (or a wrong letter) in it, one line naming what and where
    (page 5 of the excerpt is the booklet's page 6)."""
    monkeypatch.setattr(booklet, "LIGATURE_GLYPHS", {})
    with pytest.raises(
        BookletParseError, match=r"question 20 \(page 5\): choice \(D\) holds U\+FFFD"
    ) as error:
        parse_booklet(eleventh_pages_2_to_6(), question_count=23)
    assert "a inves\ufffdgação" in str(error.value)


def test_item_codes_page_numbers_and_watermark_stay_out(shared_oab: Path) -> None:
    """2nd edition: `01 A00413` opens a question; `– 3 –`, `Caderno de Prova 01` and the download
    site's watermark frame every page."""
    text = " ".join(getattr(q, name) for q in archive_booklet(2).questions for name in FIELDS)
    for furniture in ("A00413", "– 3 –", "Caderno de Prova", "questoesdeconcursos", "2010.2"):
        assert furniture not in text


def test_syllable_hyphen_and_missing_space_of_the_2nd_edition(shared_oab: Path) -> None:
    # "excepcio-" ends a line and "nalmente" starts the next; the booklet prints the word whole too.
    assert (
        question(2, 35).choice_d
        == "Se o pedido formulado for genérico, admite-se, excepcionalmente, sentença ilíquida."
    )
    assert question(2, 24).stem.endswith("a quem caberá a herança de Joaquim.")  # no space glyph, a gap
    assert "deparou-se com a recusa" in question(2, 28).stem  # a real hyphen at a line end stays


def test_paragraphs_of_the_older_layouts(shared_oab: Path) -> None:
    # 3rd edition: no extra gap between paragraphs; a short line ending a sentence ends one.
    assert (
        question(3, 1).stem.split("\n")[1]
        == "Na qualidade de advogado dessas últimas três empresas, qual deve ser a providência tomada?"
    )
    # 1st edition: the right column of page 2 is set looser than the left; no break inside a sentence.
    assert question(1, 4).stem == (
        "Assinale a opção correta de acordo com as disposições do Regulamento Geral do Estatuto da Advocacia e da OAB."
    )
    # 37th: a dash at a line end keeps its spaces.
    assert "seu ex-empregador - a sociedade empresária Alfa -, e dos 3 sócios dela" in question(37, 77).stem


# ---------------------------------------------------------------- refused layouts


def _footer_booklet(opener: str, choice: str) -> bytes:
    """Two pages with the roman running footer of the 7th-37th editions and questions whose
    openers and choice markers follow the given formats ("{n}", "{letter}")."""
    with pymupdf.open() as doc:
        for page_number in (1, 2):
            page = doc.new_page(width=595, height=842)
            page.insert_text(
                (200, 815), "XXV EXAME DE ORDEM UNIFICADO - TIPO 01 - BRANCA", fontname="hebo", fontsize=9
            )
            page.insert_text((300, 790), str(page_number), fontsize=9)
            y = 60.0
            for number in range(page_number * 2 - 1, page_number * 2 + 1):
                page.insert_text((40, y), opener.format(n=number), fontname="hebo", fontsize=10)
                page.insert_text((40, y + 20), f"Enunciado da questão {number}.", fontsize=10)
                for i, letter in enumerate("ABCD"):
                    page.insert_text(
                        (40, y + 40 + 12 * i), f"{choice.format(letter=letter)} opção {letter}.", fontsize=10
                    )
                y += 120
        return doc.tobytes()


def test_known_running_footer_with_unknown_question_openers_is_refused() -> None:
    with pytest.raises(BookletParseError) as error:
        parse_booklet(_footer_booklet("Q.{n}", "{letter})"))
    message = str(error.value)
    assert message.startswith(
        "edition 25 booklet, pages 1-2: unknown booklet layout: question 1 not found, expected "
    )
    assert "'Questão N' alone on its row then choice 'A)' or '(A)'" in message
    assert "\n" not in message


def test_known_openers_with_unknown_choice_markers_are_refused() -> None:
    with pytest.raises(BookletParseError, match=r"edition 25 booklet, pages 1-2: unknown booklet layout"):
        parse_booklet(_footer_booklet("Questão {n}", "[{letter}]"))


def test_a_booklet_of_a_known_layout_parses_with_its_question_count() -> None:
    """The same synthetic pages in a known layout: 4 questions when 4 are expected, and a clear
    error when the registry expects another count."""
    pdf = _footer_booklet("Questão {n}", "{letter})")
    booklet = parse_booklet(pdf, question_count=4)
    assert booklet.edition_in_header == 25
    assert [q.choice_c for q in booklet.questions] == ["opção C."] * 4
    assert booklet.questions[3].stem == "Enunciado da questão 4."
    with pytest.raises(
        BookletParseError,
        match=r"found 4 questions, expected 80: the last one found is question 4 \(page 2\)",
    ):
        parse_booklet(pdf)
    with pytest.raises(
        BookletParseError,
        match=r"found 4 questions, expected 3: the booklet goes on after question 3 \(page 2\)",
    ):
        parse_booklet(pdf, question_count=3)


def test_picture_in_a_question_of_an_older_layout_is_flagged(shared_oab: Path) -> None:
    """The 16th edition's first three pages (questions 1-11) with a raster image drawn inside
    question 8 (page 3, left column, below its stem): only question 8 requires it."""
    with pymupdf.open(stream=archive_pdf(16)) as doc:
        doc.select([0, 1, 2])
        pixmap = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 16, 8), False)
        pixmap.set_rect(pixmap.irect, (200, 60, 60))
        doc[2].insert_image(pymupdf.Rect(120, 540, 200, 560), pixmap=pixmap)
        data = doc.tobytes()
    booklet = parse_booklet(data, question_count=11)
    assert [q.number for q in booklet.questions if q.requires_image] == [8]
    assert booklet.questions[7].choice_d.endswith("procedimentos sob segredo de Justiça.")

"""Every archived booklet (1st-26th, 28th and 36th-38th editions) through parse_booklet and the blocking checks.

Marked `archive` (about 10 s of CPU): left out of the default run, run by `.ci/run` after it
(`pytest -m archive`). One booklet of each layout is in the default run: `test_booklet_layouts.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pymupdf
import pytest

from oabench_pipeline.core.exam_validation import (
    empty_fields,
    header_footer_leaks,
    numbering_problems,
    swallowed_choices,
)
from oabench_pipeline_tests.conftest import pinned_archive_entries
from oabench_pipeline_tests.core import test_booklet_layouts as layouts
from oabench_pipeline_tests.core.test_booklet_layouts import (
    archive_booklet,
    archive_entry,
    archive_pdf,
    question,
)

pytestmark = pytest.mark.archive

ARCHIVED = [*range(1, 27), 28, 36, 37, 38]


def test_the_archive_holds_every_archived_edition_the_registry_pins(shared_oab: Path) -> None:
    assert sorted(pinned_archive_entries()) == ARCHIVED


def test_the_21st_booklet_metadata_names_the_20th(shared_oab: Path) -> None:
    """Why the edition is read from the pages: this PDF's metadata is wrong."""
    with pymupdf.open(stream=archive_pdf(21)) as doc:
        assert "_XX_" in doc.metadata["title"]
    assert archive_booklet(21).edition_in_header == 21


@pytest.mark.parametrize("edition", ARCHIVED)
def test_archived_booklet_passes_every_blocking_check(edition: int, shared_oab: Path) -> None:
    """The edition its own pages name (the 21st's PDF metadata says XX), every question whole."""
    booklet = archive_booklet(edition)
    count = archive_entry(edition)["questions"]
    assert booklet.edition_in_header == edition
    questions = booklet.questions
    assert numbering_problems(questions, count) == []
    assert empty_fields(questions) == []
    assert header_footer_leaks(questions) == []
    assert swallowed_choices(questions) == []
    assert not any(q.requires_image for q in questions)


# Questions of the 26th and 28th (the 7th-25th's layout), each checked by eye against the page rendered at
# 80 dpi; the 36th's and 38th's are in test_booklet_layouts.py's SPOT_CHECKS.
NEW_EDITION_SPOTS: list[tuple[Any, ...]] = [
    (
        26,
        80,
        [22],
        ("Gustavo foi empregado da empresa Pizzaria Massa", "da CLT, assinale a afirmativa correta."),
        (
            "Viável a homologação do acordo extrajudicial, porque",
            "manifestação de vontade das partes envolvidas.",
        ),
        ("Não será possível a homologação, porque empregado", "empregador não podem ter advogado comum."),
        (
            "Impossível a pretensão, porque, na Justiça do",
            "de jurisdição voluntária, mas apenas contenciosa.",
        ),
        ("Para a validade do acordo proposto, seria", "vezes o teto da Previdência Social."),
    ),
    (
        28,
        47,
        [16],
        (
            "Indústria de Celulose Três Rios Ltda. requereu",
            "recuperação extrajudicial, assinale a afirmativa correta.",
        ),
        ("O plano pode ser homologado porque, mesmo", "quintos dos créditos de cada classe."),
        ("O plano não pode ser homologado porque,", "que seja o quórum de aprovação."),
        ("O plano pode ser homologado porque o", "aplicando a exigência aos créditos quirografários."),
        ("O plano não pode ser homologado por", "supressão da cláusula de variação cambial."),
    ),
]


@pytest.mark.parametrize("spot", NEW_EDITION_SPOTS, ids=lambda s: f"{s[0]}-q{s[1]}")
def test_spot_checked_questions_of_the_26th_and_28th(spot: tuple[Any, ...], shared_oab: Path) -> None:
    layouts.test_spot_checked_questions(spot, shared_oab)


def test_the_36th_cover_is_garbled_and_its_question_pages_are_not(shared_oab: Path) -> None:
    """The examiners' own file: the cover's text layer maps its glyphs to other code points (`dŝƉŽϭ`), so
    the edition is read from the question pages' running footer, which is clean."""
    with pymupdf.open(stream=archive_pdf(36)) as doc:
        cover = doc[0].get_text()
    assert "EXAME" not in cover.upper() and "ĚĞ" in cover
    booklet = archive_booklet(36)
    assert booklet.edition_in_header == 36
    assert question(36, 1).stem.startswith("Celso, advogado, foi contratado por Maria")


def test_a_sentence_ending_short_of_its_questions_justified_edge_ends_a_paragraph(shared_oab: Path) -> None:
    """Paragraphs set without a gap between them, whose last line ends a sentence 1.9-5 pt short of
    the question's justified right edge (less than the column's longest lines would tell): 13
    stems of the 5th-25th editions, each checked against the page."""
    paragraphs = question(21, 49).stem.split("\n")
    last = paragraphs.index(
        "O devedor enviou carta a todos os credores sujeitos ao plano, domiciliados ou sediados no país, "
        "informando a distribuição do pedido, as condições do plano e o prazo para impugnação."
    )
    assert paragraphs[last + 1].startswith("Você, como advogado(a) de um desse credores, pretende impugnar")
    assert (
        question(20, 73).stem.split("\n")[1].startswith("De acordo com a CLT, sobre uma eventual reclamação")
    )
    assert (
        question(24, 2).stem.split("\n")[1]
        == "Sobre o direito de Inácio à percepção de honorários, assinale a afirmativa correta."
    )
    assert question(5, 43).stem.split("\n")[1].startswith("Analisando a hipótese e, estando Zélia de acordo")
    # A ragged-right question keeps its sentences in one paragraph where no gap separates them.
    assert "\n" not in question(37, 40).choice_b

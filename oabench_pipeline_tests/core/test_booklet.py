"""parse_booklet on the three real booklets (spot-checked by eye) and on synthetic layouts."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from oabench_pipeline.core.booklet import BookletParseError, parse_booklet
from oabench_pipeline.core.exam_validation import header_footer_leaks, swallowed_choices
from oabench_pipeline.core.records import ParsedBooklet, ParsedQuestion
from oabench_pipeline_tests.conftest import shared_oab_dir
from oabench_pipeline_tests.core.synthetic_pdfs import (
    SyntheticQuestion,
    filler_text,
    make_booklet_pdf,
    sample_question,
    sample_questions,
)

EDITIONS = (43, 44, 45)
FIELDS = ("stem", "choice_a", "choice_b", "choice_c", "choice_d")


def norm(text: str) -> str:
    """Whitespace-normalised text: the parser's output is the PDF text up to whitespace."""
    return " ".join(text.split())


@cache
def real_booklet(edition: int) -> ParsedBooklet:
    """Parsed once per session: the three real booklets named by manifest.json."""
    import json

    root = shared_oab_dir()
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    entry = next(e for e in manifest["editions"] if e["edition"] == edition)
    return parse_booklet((root / entry["prova"]["file"]).read_bytes())


def question(edition: int, number: int) -> ParsedQuestion:
    return real_booklet(edition).questions[number - 1]


@pytest.mark.parametrize("edition", EDITIONS)
def test_real_booklet_has_80_complete_questions(edition: int, shared_oab: Path) -> None:
    booklet = real_booklet(edition)
    assert booklet.edition_in_header == edition
    assert [q.number for q in booklet.questions] == list(range(1, 81))
    for q in booklet.questions:
        assert all(getattr(q, name).strip() for name in FIELDS), q.number
        # Page 1 is the cover, page 2 the instructions, the questionnaire follows question 80.
        assert 3 <= q.pages[0] <= q.pages[-1] <= 22
    assert header_footer_leaks(booklet.questions) == []
    assert swallowed_choices(booklet.questions) == []


@pytest.mark.parametrize("edition", EDITIONS)
def test_real_booklets_have_no_pictures_and_no_split_questions(edition: int, shared_oab: Path) -> None:
    """Checked by eye on the rendered pages: FGV keeps every question in one column of one page,
    and these three booklets carry no figure inside a question (only header/footer logos)."""
    booklet = real_booklet(edition)
    assert all(len(q.pages) == 1 for q in booklet.questions)
    assert not any(q.requires_image for q in booklet.questions)


# (edition, number, pages, [(first 45 chars, last 45 chars) for stem, A, B, C, D]), whitespace
# normalised; each checked by eye against the page rendered with pymupdf at 100 dpi.
SPOT_CHECKS: list[tuple[Any, ...]] = [
    (
        43,
        1,
        [3],
        ("O advogado Antônio comenta em matérias veicul", "iplina da OAB, assinale a afirmativa correta."),
        ("É autorizado que Antônio responda às consulta", "e na página mencionada para promoção pessoal."),
        ("É vedado que Antônio mencione seu e-mail e te", "ssim como o nome do escritório onde trabalha."),
        ("Antônio não poderá fornecer, nas matérias que", "efone, mas é permitida a referência a e-mail."),
        ("Não é vedado que Antônio, ao comentar a atuaç", "para a explicação de tais normas e conceitos."),
    ),
    (
        43,
        2,
        [3],
        ("Paulo Afrânio foi representado ao Tribunal de", "âmbito da OAB, assinale a afirmativa correta."),
        ("O procedimento adotado pelo relator foi corre", "esa prévia e a apresentação de razões finais."),
        ("Nos casos de parecer preliminar do relator re", ", homologar o parecer, aplicando essa sanção."),
        ("A condução do processo disciplinar pelo relat", " se atropelem etapas do processo disciplinar."),
        ("Não houve violação da ampla defesa do advogad", "e reconhecesse a ilegalidade do procedimento."),
    ),
    (
        43,
        17,
        [7],
        ("Na condição de advogado(a), você é procurado(", "er o caso em questão diretamente à apreciação"),
        ("da Corte Internacional de Justiça.", "da Corte Internacional de Justiça."),
        ("do Tribunal Penal Internacional.", "do Tribunal Penal Internacional."),
        ("do Conselho de Direitos Humanos das Nações Un", "nselho de Direitos Humanos das Nações Unidas."),
        ("do Alto Comissariado das Nações Unidas para o", "o das Nações Unidas para os Direitos Humanos."),
    ),
    (
        43,
        21,
        [7],
        ("Uma artista brasileira, que protagoniza filme", "rocesso Civil, assinale a afirmativa correta."),
        ("A autoridade judiciária brasileira não é comp", ", porque o réu é pessoa jurídica estrangeira."),
        ("A autoridade judiciária brasileira é competen", "porque a autora tem nacionalidade brasileira."),
        ("A autoridade judiciária brasileira tem compet", "porque os danos à imagem ocorreram no Brasil."),
        ("A autoridade brasileira deve remeter o caso, ", "tal de notícias é sediado nos Estados Unidos."),
    ),
    (
        43,
        40,
        [12],
        ("Paulo e Glória mantiveram união estável por 2", "ssão de Paulo, assinale a afirmativa correta."),
        ("Glória terá direito à meação, R$ 800.000 (oit", "á dividido igualmente entre os avós de Paulo."),
        ("Glória terá direito à meação, no valor de R$ ", "s não concorrerá com os ascendentes de Paulo."),
        ("Glória terá direito ao valor total dos bens, ", "fasta da sucessão os ascendentes do falecido."),
        ("Glória terá direito à meação, no valor de R$ ", "o, o correspondente a 1/3 (um terço) cada um."),
    ),
    (
        43,
        41,
        [12],
        ("No edifício em que reside Carolina, há, nas j", " caso narrado, assinale a afirmativa correta."),
        ("Carolina somente responde pelo prejuízo de Th", "e Thiago, se este provar dolo por parte dela."),
        ("Carolina somente responde pelo prejuízo de Th", " se este provar dolo ou culpa por parte dela."),
        ("Carolina responde pelo prejuízo de Thiago, in", "nte de prova de dolo ou culpa por parte dela."),
        ("Por se tratar de elemento original da constru", "responsabilidade pelo que cair da jardineira."),
    ),
    (
        43,
        74,
        [19],
        ("Em sede de sentença prolatada nos autos de re", " apresentados, assinale a afirmativa correta."),
        ("Dada a concomitância de motivações para o tér", "vidas as verbas trabalhistas daí decorrentes."),
        ("Configurada a culpa recíproca, seu cliente te", "salário proporcionais e à multa sobre o FGTS."),
        ("Configurada a culpa recíproca, seu cliente te", "ta sobre o FGTS, no entanto, não será devida."),
        ("Configurada a culpa recíproca, seu cliente te", "s sejam, férias vencidas e saldo de salários."),
    ),
    (
        43,
        80,
        [21],
        ("Em execução que tramita perante a 120ª Vara d", "a de regência, assinale a afirmativa correta."),
        ("É desnecessária a garantia do Juízo e o ente ", " público terá 30 (trinta) dias para embargar."),
        ("Caberá ao ente público garantir o Juízo e aju", "ar embargos à execução no prazo de oito dias."),
        ("É desnecessária a garantia do Juízo e o ente ", " o ente público terá oito dias para embargar."),
        ("Caberá ao ente público garantir o Juízo e aju", "izar embargos à execução no prazo de 16 dias."),
    ),
    (
        44,
        1,
        [3],
        ("Antônia, advogada atuante na área previdenciá", " da Advocacia, assinale a afirmativa correta."),
        ("Antônia advogou contra literal disposição de ", "igância de má-fé aplicada pelo juiz da causa."),
        ("Antônia advogou contra literal disposição de ", "o competente da OAB, à pena isolada de multa."),
        ("Antônia advogou contra literal disposição de ", "inconstitucionalidade ou na injustiça da lei."),
        ("Antônia advogou contra literal disposição de ", "el na defesa dos interesses de seus clientes."),
    ),
    (
        44,
        7,
        [4],
        ("No âmbito de investigação sigilosa, o Magistr", "esse contexto, assinale a afirmativa correta."),
        ("Carlos somente terá acesso aos autos da inves", "o possível a imposição de qualquer limitação."),
        ("Carlos deverá ter acesso aos autos da investi", "o possível a imposição de qualquer limitação."),
        ("Carlos somente terá acesso aos autos da inves", "da eficácia ou da finalidade da investigação."),
        ("Carlos deverá ter acesso aos autos da investi", "da eficácia ou da finalidade da investigação."),
    ),
    (
        44,
        23,
        [8],
        ("Em um determinado exercício financeiro, o Pro", "deral de 1988, assinale a afirmativa correta."),
        ("A autorização para abertura de créditos adici", "suplementares não poderia constar neste PLOA."),
        ("A autorização para abertura de créditos adici", "eciais foi indevidamente inserida neste PLOA."),
        ("A autorização para contratação de operações d", " crédito não poderia ser prevista neste PLOA."),
        ("A Constituição Federal expressamente proíbe q", "rações de crédito por antecipação de receita."),
    ),
    (
        44,
        32,
        [10],
        ("A sociedade empresária Chique possui dois con", "stada por você à sociedade empresária Chique."),
        ("O contrato, que não prevê expressamente a uti", "instrumentos consensuais para tal finalidade."),
        ("O contrato, que possui previsão expressa, pod", "rios isonômicos, técnicos e de transparência."),
        ("A conciliação e a mediação não são admitidas ", "a hipótese em que exista previsão contratual."),
        ("Em razão da natureza do conflito, que versa s", "a e pela sociedade empresária Chique, é nula."),
    ),
    (
        44,
        69,
        [19],
        ("Manoel, mecânico de manutenção, após acidente", "to hipotético, assinale a afirmativa correta."),
        ("No seu processo de reabilitação profissional ", "stá incluído o transporte, quando necessário."),
        ("Manoel poderia se recusar a fazer a reabilita", " obrigatória a ser observada pelos segurados."),
        ("A reabilitação profissional permitirá seu ret", "ontará com estabilidade provisória de 5 anos."),
        ("A reabilitação profissional não compreende o ", " e de instrumentos de auxílio para locomoção."),
    ),
    (
        44,
        70,
        [19],
        ("Humberto Alves, profissional liberal, desempe", "ônomo no RGPS, assinale a afirmativa correta."),
        ("Ele é segurado obrigatório do Regime Geral de", "atório do Regime Geral de Previdência Social."),
        ("Ele não poderá obter aposentadoria por idade ", "ria por idade ou por incapacidade permanente."),
        ("Ele, por não possuir relação de emprego, é di", "o de quaisquer recolhimentos previdenciários."),
        ("Ele se qualifica como segurado trabalhador av", "avulso do Regime Geral de Previdência Social."),
    ),
    (
        44,
        80,
        [21],
        ("Soraya integrava o contrato social de uma soc", "e prevê a CLT, assinale a afirmativa correta."),
        ("É possível a execução de Soraya porque, entre", "da ação, transcorreu prazo inferior a 2 anos."),
        ("Uma vez que entre o afastamento de Soraya e o", "erior a 2 anos, ela não poderá ser executada."),
        ("Entre o afastamento de Soraya e o ajuizamento", "pelo que a ex-sócia não poderá ser executada."),
        ("Tendo sido sócia à época da prestação dos ser", ", Soraya pode ser executada a qualquer tempo."),
    ),
    (
        45,
        1,
        [3],
        ("Os irmãos, Matilde, advogada, e Frederico, co", "dos do Brasil, assinale a afirmativa correta."),
        ("É vedada a divulgação dos serviços advocatíci", "dade, inclusive a de consultoria empresarial."),
        ("A publicidade conjunta dos serviços advocatíc", " de plataformas digitais, como redes sociais."),
        ("Matilde e Frederico podem atuar conjuntamente", "resarial possuem afinidade e se complementam."),
        ("A divulgação dos serviços advocatícios juntam", "licidade sejam sóbrios e não induzam ao erro."),
    ),
    (
        45,
        9,
        [4],
        ("Leia o fragmento a seguir. Encontrar uma form", ", segundo Rousseau, responde a esse problema."),
        ("Luta de Classes.", "Luta de Classes."),
        ("Contrato Social.", "Contrato Social."),
        ("União das Nações.", "União das Nações."),
        ("Utilitarismo de Regras.", "Utilitarismo de Regras."),
    ),
    (
        45,
        10,
        [5],
        ("Considere hipoteticamente que determinado Tri", "bunal nos casos I, II e III, respectivamente."),
        ("Extensiva, teleológica e axiológica.", "Extensiva, teleológica e axiológica."),
        ("Axiológica, restritiva e especificadora.", "Axiológica, restritiva e especificadora."),
        ("Restritiva, especificadora e extensiva.", "Restritiva, especificadora e extensiva."),
        ("Especificadora, restritiva e teleológica.", "Especificadora, restritiva e teleológica."),
    ),
    (
        45,
        30,
        [10],
        ("José é servidor público estadual lotado em um", "to correto prestado pela assessoria jurídica."),
        ("A existência de vício exige que a Administraç", "idades do caso, sejam anormais ou excessivos."),
        ("Constatado que o vício é insanável, a decisão", "as consequências jurídicas e administrativas."),
        ("A verificação de qualquer vício em ato admini", "nativas possam justificar a sua convalidação."),
        ("No âmbito da esfera controladora, observado o", "a necessidade e adequação de tal invalidação."),
    ),
    (
        45,
        45,
        [14],
        ("Augusto assinou um contrato de adesão com a s", "do Consumidor, assinale a afirmativa correta."),
        ("Por ser um contrato escrito, Augusto não tem ", " pela sociedade empresária e aceitos por ele."),
        ("Augusto deve questionar judicialmente a cobra", "láusulas ambíguas, contraditórias ou omissas."),
        ("Como o fornecimento de água é um serviço esse", "dos valores retroativos nos termos pactuados."),
        ("A sociedade empresária AquaLimpa pode cortar ", ", independentemente de notificação, é lícita."),
    ),
    (
        45,
        63,
        [18],
        ("Lucas era investigado por estupro de vulneráv", "ssual Penal que o(a) advogado(a) deve adotar."),
        ("A ocorrência do trânsito em julgado impede qu", "ada em prova nova, mediante revisão criminal."),
        ("Pode ser alegada a nulidade da busca e apreen", "ou a diligência, impetrando-se habeas corpus."),
        ("Pode ser impetrado habeas corpus, alegando a ", "o, diante da incompetência absoluta do Juízo."),
        ("Tendo em vista que a busca e apreensão foi de", "o pela impetração de um mandado de segurança."),
    ),
    (
        45,
        73,
        [21],
        ("Jéssica trabalha em um hospital particular de", "termos da CLT, assinale a afirmativa correta."),
        ("A empregada, durante a gestação, fez jus ao a", "ça, não se estendendo ao período de lactação."),
        ("O direito ao adicional de insalubridade, até ", " a qual a sociedade empresária não colaborou."),
        ("Jéssica, de acordo com a norma de regência, t", "estiver em local sem agente agressor à saúde."),
        ("A sociedade empresária deve pagar o adicional", "ompensação desse valor na cota-parte do INSS."),
    ),
    (
        45,
        80,
        [22],
        ("Você foi procurado(a) por um Sindicato de Emp", "re a hipótese, assinale a afirmativa correta."),
        ("A ação deverá ser ajuizada na Justiça do Trab", "o deverá ser ajuizada na Justiça do Trabalho."),
        ("A ação deverá ser ajuizada na Justiça Comum F", "deverá ser ajuizada na Justiça Comum Federal."),
        ("A ação deverá ser ajuizada na Justiça Comum E", "everá ser ajuizada na Justiça Comum Estadual."),
        ("Não caberá ajuizamento de ação judicial, mas ", "strativo no Ministério do Trabalho e Emprego."),
    ),
]


@pytest.mark.parametrize("spot", SPOT_CHECKS, ids=lambda s: f"{s[0]}-q{s[1]}")
def test_spot_checked_questions(spot: tuple[Any, ...], shared_oab: Path) -> None:
    edition, number, pages, *expected = spot
    q = question(edition, number)
    assert q.pages == pages
    for name, (head, tail) in zip(FIELDS, expected, strict=True):
        text = norm(getattr(q, name))
        assert text.startswith(head), (name, text[:60])
        assert text.endswith(tail), (name, text[-60:])


def test_paragraphs_quotes_and_lists_keep_their_line_breaks(shared_oab: Path) -> None:
    # 45th q9: intro, italic quotation, right-aligned attribution in 7 pt, then the request.
    assert question(45, 9).stem.split("\n") == [
        "Leia o fragmento a seguir.",
        "Encontrar uma forma de associação que defenda e proteja as pessoas e os bens de cada associado "
        "com toda a força comum, e pela qual cada um, unindo-se a todos, só obedece a si mesmo, "
        "permanecendo, assim, tão livre quanto antes.",
        "(Jean-Jacques Rousseau)",
        "Assinale a opção que indica a forma de associação que, segundo Rousseau, responde a esse problema.",
    ]
    # 44th q23: roman-numbered items each on their own line.
    items = question(44, 23).stem.split("\n")
    assert [line.split(".")[0] for line in items[1:5]] == ["I", "II", "III", "IV"]
    # 44th q32: three tightly spaced paragraphs (2.4 pt instead of 4 pt between them).
    assert len(question(44, 32).stem.split("\n")) == 3


def test_hyphenated_line_ends_and_superscripts_join_without_space(shared_oab: Path) -> None:
    assert "Trata-se de elemento original" in question(43, 41).stem
    assert "o seguro-desemprego do emprego anterior" in question(43, 72).stem
    assert "Art. 241-A e do Art. 241-B" in question(45, 63).stem
    assert "área de 160 m2 (cento e sessenta" in question(43, 42).stem
    # Justified lines come out of pymupdf as one fragment per word; rows are rebuilt with spaces.
    assert "A sociedade empresária AquaLimpa pode cortar o fornecimento" in question(45, 45).choice_d


def test_real_text_matches_pymupdf_words(shared_oab: Path) -> None:
    """Whitespace aside, a question's fields are exactly the words pymupdf sees in its region."""
    root = shared_oab_dir()
    import json

    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    entry = next(e for e in manifest["editions"] if e["edition"] == 43)
    with pymupdf.open(root / entry["prova"]["file"]) as doc:
        # Question 80 is alone in the right column of page 21.
        page = doc[20]
        words = page.get_text("words", clip=pymupdf.Rect(300, 60, 595, 790), sort=True)
    q = question(43, 80)
    parsed = " ".join(["80", *(getattr(q, name) for name in FIELDS)])
    printed = " ".join(w[4] for w in words)
    for letter in "ABCD":
        printed = printed.replace(f"({letter}) ", "", 1)
    assert norm(parsed) == norm(printed)


# ---------------------------------------------------------------- synthetic booklets

LONG_WORDS = 1100  # more than the rest of a column plus a whole column: spans two breaks
QUOTING_CHOICE = "Conforme o item (A) do edital e a alínea (B) do regulamento, o prazo é de 5 dias."


@cache
def synthetic() -> tuple[list[SyntheticQuestion], ParsedBooklet, bytes]:
    questions = sample_questions()
    questions[1] = SyntheticQuestion(
        number=2,
        stem=filler_text(LONG_WORDS, seed=2) + "\nAssinale a afirmativa correta.",
        choices=("Primeira opção.", QUOTING_CHOICE, filler_text(30, seed=7), "(A) e (B) estão corretas."),
    )
    questions[9] = SyntheticQuestion(
        10, "Observe a figura.\nAssinale a opção correta.", ("a", "b", "c", "d"), "raster"
    )
    questions[19] = SyntheticQuestion(
        20, "Observe o gráfico.\nAssinale a opção correta.", ("a", "b", "c", "d"), "vector"
    )
    pdf = make_booklet_pdf(46, questions, justify=False)
    return questions, parse_booklet(pdf), pdf


def test_synthetic_booklet_round_trips() -> None:
    questions, booklet, _ = synthetic()
    assert booklet.edition_in_header == 46
    assert len(booklet.questions) == 80
    for given, parsed in zip(questions, booklet.questions, strict=True):
        assert parsed.number == given.number
        assert norm(parsed.stem) == norm(given.stem)
        assert [parsed.choice_a, parsed.choice_b, parsed.choice_c, parsed.choice_d] == list(given.choices)


def test_question_spanning_a_column_and_a_page_break_is_joined() -> None:
    questions, booklet, pdf = synthetic()
    long_question = booklet.questions[1]
    assert long_question.pages == [2, 3]  # page 1 is the cover
    assert norm(long_question.stem) == norm(questions[1].stem)
    # It really did cross the column break on page 2 and the page break: its words are in both
    # columns of page 2 and at the top of page 3.
    last_word = questions[1].stem.split("\n")[0].split()[-1]
    with pymupdf.open(stream=pdf) as doc:
        assert doc[1].search_for(filler_text(LONG_WORDS, seed=2)[:20])[0].x0 < 297
        assert any(r.x0 > 297 for r in doc[1].search_for(questions[1].stem.split()[400]))
        assert doc[2].search_for(last_word)
    # The paragraph break inside one column survives; the question after it is intact.
    assert long_question.stem.endswith("\nAssinale a afirmativa correta.")
    assert booklet.questions[2].stem == questions[2].stem


def test_choice_quoting_a_marker_does_not_split() -> None:
    _, booklet, _ = synthetic()
    assert booklet.questions[1].choice_b == QUOTING_CHOICE
    assert booklet.questions[1].choice_d == "(A) e (B) estão corretas."


def test_requires_image_only_for_pictures_inside_the_question() -> None:
    _, booklet, _ = synthetic()
    flagged = [q.number for q in booklet.questions if q.requires_image]
    # Raster (q10) and vector (q20) pictures; header/footer logos and rules are not pictures.
    assert flagged == [10, 20]


def test_justified_lines_are_rebuilt() -> None:
    questions = [sample_question(n, stem_words=30, choice_words=12) for n in range(1, 81)]
    booklet = parse_booklet(make_booklet_pdf(47, questions, justify=True, cover=False, questionnaire=False))
    assert [norm(q.stem) for q in booklet.questions] == [norm(q.stem) for q in questions]


# ---------------------------------------------------------------- errors


def test_garbage_and_empty_bytes_raise_booklet_parse_error() -> None:
    with pytest.raises(BookletParseError, match="not a readable PDF"):
        parse_booklet(b"%PDF-1.7 this is not really a pdf")
    with pytest.raises(BookletParseError, match="empty"):
        parse_booklet(b"")
    assert issubclass(BookletParseError, ValueError)


def test_pdf_without_running_header_is_rejected() -> None:
    with pymupdf.open() as doc:
        doc.new_page().insert_text((72, 72), "Um PDF qualquer")
        data = doc.tobytes()
    with pytest.raises(BookletParseError, match="running header"):
        parse_booklet(data)


def test_missing_question_is_reported_with_its_neighbour() -> None:
    questions = [q for q in sample_questions() if q.number != 37]
    with pytest.raises(
        BookletParseError, match=r"found 36 questions.*question 36 \(page \d+\).*question 37 was not"
    ):
        parse_booklet(make_booklet_pdf(46, questions))


def test_missing_choice_is_reported_with_question_and_page() -> None:
    """Redact the "(C)" marker of question 12: its text then reads as part of (B), so (C) and (D)
    never open, and the error names the question and its page."""
    with pymupdf.open(stream=make_booklet_pdf(46, sample_questions())) as doc:
        page = next(p for p in doc if p.search_for("Opção C da questão 12:"))
        phrase = page.search_for("(C) Opção C da questão 12:")[0]
        marker = next(r for r in page.search_for("(C)") if r.intersects(phrase))
        page.add_redact_annot(marker)
        page.apply_redactions()
        data, page_number = doc.tobytes(), page.number + 1
    with pytest.raises(
        BookletParseError, match=rf"question 12 \(page {page_number}\): choice \(C\), \(D\) not found"
    ):
        parse_booklet(data)


def test_editions_must_agree_across_running_headers() -> None:
    first = make_booklet_pdf(46, sample_questions()[:40], questionnaire=False)
    second = make_booklet_pdf(45, sample_questions()[40:], cover=False)
    with pymupdf.open(stream=first) as doc, pymupdf.open(stream=second) as rest:
        doc.insert_pdf(rest)
        data = doc.tobytes()
    with pytest.raises(BookletParseError, match="disagree on the edition"):
        parse_booklet(data)

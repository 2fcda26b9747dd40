"""Plausibility checks on parsed questions, for the Dagster asset checks of the exam assets.

Each function returns a list of human-readable problems (empty = fine), naming the question
and the field, so an asset check can show them as they are. They look for the ways a booklet
parser goes wrong silently: running header/footer text pulled into a question, a choice marker
left inside the stem (or the next question swallowed by choice D), gaps in the numbering,
blank fields, and questions whose words do not fit the legal area they were assigned to.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from oabench_pipeline.core.records import ParsedQuestion

FIELDS = ("stem", "choice_a", "choice_b", "choice_c", "choice_d")

# Text of the running headers/footers, page furniture and end matter of the booklets of every
# edition (FGV and the 1st edition's CESPE); none belongs in a question. Upper-case patterns are
# case-sensitive: a stem may mention "o XX Exame de Ordem Unificado" in running text.
HEADER_FOOTER_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\d{1,3}\s*[oº°]?\s*EXAME\s+D[EO]\s+ORDEM\s+UNIFICADO"),  # 43º EXAME DO ORDEM UNIFICADO
    re.compile(r"\b[IVXLC]+\s+EXAME\s+DE\s+ORDEM\s+UNIFICADO"),  # XXV EXAME DE ORDEM UNIFICADO
    re.compile(r"EXAME\s+DE\s+ORDEM(?:\s+UNIFICADO)?\s+20\d\d\.\d", re.IGNORECASE),  # ... 2010.3
    re.compile(r"TIPO\s+0?1\s*[–-]\s*BRANC[AO]"),
    re.compile(r"Tipo\s+Branca", re.IGNORECASE),
    re.compile(r"Branca\s*[–-]\s*P[áa]gina\s+\d+", re.IGNORECASE),
    re.compile(r"(?<!– )(?<!- )\bPágina\s+\d{1,3}\b"),  # alone (3rd-6th); after "Branca – ", above
    re.compile(r"PROVA\s+APLICADA\s+EM"),
    re.compile(r"Caderno\s+de\s+Prova\s+\d+|Caderno\s+AFONSO\s+ARINOS", re.IGNORECASE),
    re.compile(r"questoesdeconcursos", re.IGNORECASE),
    re.compile(r"(?:^|\s)–\s\d{1,3}\s–(?:\s|$)"),  # the page number "– 2 –"
    re.compile(r"\bA\d{5}\b"),  # the 2nd edition's item codes
    re.compile(r"QUESTIONÁRIO\s+DE\s+PERCEPÇÃO", re.IGNORECASE),
    re.compile(r"FGV\s+CONHECIMENTO", re.IGNORECASE),
    re.compile(r"Qualquer semelhança nominal", re.IGNORECASE),
)
# A choice marker as the booklets print it, "(B) " or (7th-37th editions) "B) ", followed by
# the start of a sentence.
CHOICE_MARKER_RE = re.compile(r"(?:^|\s)\(?([A-D])\)\s+[A-ZÀ-ÝÉ0-9“\"]")
# The closing request of a stem; inside a choice it means the next question's stem leaked in.
STEM_CLOSING_RE = re.compile(r"assinale a (?:afirmativa|opção|alternativa)", re.IGNORECASE)

# Words expected in most questions of an area: (area-name pattern, keyword pattern, description). The first
# rule whose name pattern matches an area judges it (so `Processo Penal` is judged with `Penal`'s words).
# One rule per canonical area of the editions registry, so every scheme of every era is judged; each
# list was checked on every edition since 2010 (no warning on the registry's schemes), and each stays
# narrow enough that a range shifted by a few questions loses its words.
AREA_KEYWORDS: tuple[tuple[re.Pattern[str], re.Pattern[str], str], ...] = tuple(
    (re.compile(name, re.IGNORECASE), re.compile(words, re.IGNORECASE), description)
    for name, words, description in (
        ("Ética", r"\bOAB\b|advoga|Estatuto da Advocacia", "OAB/advogad*/advocacia"),
        (
            "Filosofia",
            r"filos|Kelsen|Bobbio|Dworkin|Kant|Arist[óo]teles|Hobbes|Rousseau|Locke|Montesquieu|Bentham|"
            r"Stuart Mill|Radbruch|Ihering|Savigny|Alexy|Habermas|Larenz|Reale|Hart\b|Rawls|Perelman|positivis|"
            r"MacCormick|Foucault|jusnatural|hermen[êe]ut|antinomi|lacuna|interpreta|justi[çc]a",
            "filosof*/a philosopher's name/positivis*/hermenêutica/justiça",
        ),
        (
            "Direitos Humanos",
            r"direitos humanos|Interamericana|Conven[çc][ãa]o|Pacto|Declara[çc][ãa]o|Na[çc][õo]es Unidas|"
            r"\bONU\b|tortura|discrimina|ind[íi]gena|quilombol|afro-?brasileir|defici[êe]ncia|refugiad|dignidade|"
            r"idos[oa]",
            "direitos humanos/Convenção/Pacto/ONU/tortura/discriminação/indígena",
        ),
        (
            "Eleitoral",
            r"eleito|elei[çc]|candidat|partid|\bTSE\b|\bTRE\b|ineleg|mandato|sufr[áa]gio",
            "eleitor*/eleição/candidat*/partido/TSE",
        ),
        (
            "Internacional",
            r"internacional|estrangeir|tratado|conven[çc][ãa]o|consul|embaixad|diplom[áa]t|extradi|"
            r"nacionalidade|naturaliz|\bLINDB\b|Introdu[çc][ãa]o [àa]s Normas|Mercosul|\bOMC\b|\bONU\b|"
            r"Na[çc][õo]es Unidas|Interamericana|exterior|pa[íi]s|mar territorial|embarca|aeronave|"
            r"domiciliad[oa] (?:em|n[oa]) (?:Portugal|Espanha|Fran[çc]a|Alemanha|It[áa]lia)",
            "internacional/estrangeir*/tratado/nacionalidade/exterior",
        ),
        (
            "Financeiro",
            r"or[çc]ament|financeir|Responsabilidade Fiscal|\bLRF\b|despesa|receita|precat[óo]ri|"
            r"Tribunal de Contas|cr[ée]dito adicional|d[íi]vida p[úu]blica",
            "orçament*/financeir*/LRF/despesa/receita/precatório",
        ),
        (
            "Tributário",
            r"tribut|impost|contribui|\bICMS\b|\bISS\b|\bIPTU\b|fisc|\bCTN\b|al[íi]quota|lan[çc]amento|"
            r"isen[çc][ãa]o|imunidade",
            "tribut*/impost*/contribui*/fisco/CTN",
        ),
        (
            "Administrativo",
            r"administra|servidor|p[úu]blic|licita|concess|permiss|autarqui|desapropria|improbidade|"
            r"tombamento|cargo",
            "administra*/servidor/públic*/licitação/concessão",
        ),
        (
            "Ambiental",
            r"ambient|florest|fauna|flora|polui|licenciamento|conserva[çc][ãa]o|\bAPP\b|\bSNUC\b|res[íi]duo|"
            r"h[íi]dric|\bIBAMA\b|\bCONAMA\b|Sisnama|preserva|vegeta|urban|Estatuto da Cidade|agrot[óo]xic|"
            r"biodiversidade|solo",
            "ambient*/floresta/fauna/licenciamento/conservação/resíduos/urbanístico",
        ),
        (
            "^ECA|Criança",
            r"crian[çc]a|adolescent|\bECA\b|8\.069|Conselho Tutelar|infracional|socioeducativ|ado[çt]|"
            r"poder familiar|fam[íi]lia substituta|acolhimento|guarda|tutela",
            "criança/adolescente/ECA/adoção/Conselho Tutelar",
        ),
        (
            "Consumidor",
            r"consum|\bCDC\b|fornecedor|8\.078|produto|servi[çc]o|publicidade",
            "consumidor/CDC/fornecedor/produto/serviço",
        ),
        (
            "Empresarial",
            r"empres|sociedade|s[óo]ci|acionist|a[çc][õo]es|fal[êe]ncia|falid|recupera[çc][ãa]o judicial|"
            r"recupera[çc][ãa]o extrajudicial|t[íi]tulo|cheque|duplicata|promiss[óo]ria|letra de c[âa]mbio|"
            r"endoss|aval|marca|patente|quotas|cotas|capital social|estabelecimento|arrendamento mercantil|"
            r"leasing|franquia|Junta Comercial|comiss|corret|representa[çc][ãa]o comercial|ag[êe]ncia|"
            r"aliena[çc][ãa]o fiduci[áa]ria|EIRELI|deb[êe]nture|companhia|mercantil|comercial",
            "empres*/sociedade/sócio/falência/título de crédito/contrato mercantil",
        ),
        (
            "Processo Civil",
            r"\bCPC\b|Processo Civil|process|a[çc][ãa]o|demanda|ju[íi]z|senten[çc]a|recurso|apela[çc]|"
            r"agravo|embargos|tutela|execu[çc]|cita[çc]|intima[çc]|peti[çc][ãa]o|contesta[çc]|\br[ée]u\b|"
            r"autor|compet[êe]ncia|liminar|cautelar|invent[áa]rio",
            "CPC/processo/ação/juiz/sentença/recurso/execução",
        ),
        (
            "Civil",
            r"C[óo]digo Civil|contrat|propriedade|posse|herd|heran|testament|casament|c[ôo]njuge|"
            r"uni[ãa]o est[áa]vel|alimentos|doa[çc]|loca[çc]|obriga|credor|devedor|dano|indeniza|"
            r"responsabilidade civil|usucapi|condom[íi]n|servid[ãa]o|prescri|neg[óo]cio jur[íi]dico|capaz|"
            r"pessoa jur[íi]dica|\bCC\b|comodat|m[úu]tuo|fian[çc]a|compra e venda|personalidade|dados pessoais|"
            r"\bLGPD\b|direito real|vizinh|fam[íi]lia|filh",
            "Código Civil/contrato/propriedade/posse/herança/casamento/obrigação/dano",
        ),
        (
            "Previdenci",
            r"previd|\bINSS\b|aposentad|benef[íi]ci|segurad|aux[íi]lio|pens[ãa]o|8\.213|8\.212|\bRGPS\b|"
            r"seguridade|car[êe]ncia|incapacidade",
            "previdência/INSS/aposentadoria/benefício/segurado",
        ),
        ("Trabalho", r"\bCLT\b|\bTST\b|trabalh|emprega", "CLT/TST/trabalh*/emprega*"),
        (
            "Penal",
            r"crime|delito|pena\b|penal|réu|acusad|denúncia|pris",
            "crime/pena/réu/acusad*/prisão",
        ),
        (
            "Constitucional",
            r"Constitui|constitucional|\bCRFB\b|\bCF\b|\bSTF\b|Supremo Tribunal|emenda|Congresso|Senado|"
            r"C[âa]mara|Deputad|Vereador|Governador|Presidente da Rep[úu]blica|Munic[íi]pio|Estado|habeas|"
            r"mandado de|lei|direitos? fundamenta",
            "Constituição/constitucional/STF/Congresso/Estado/Município/lei",
        ),
    )
)
# Below this share of keyword-bearing questions an area assignment looks wrong.
MIN_AREA_SHARE = 0.6


def _fields(question: ParsedQuestion) -> list[tuple[str, str]]:
    return [(name, getattr(question, name)) for name in FIELDS]


def header_footer_leaks(questions: Sequence[ParsedQuestion]) -> list[str]:
    """Running header/footer (or cover) text found inside any stem or choice."""
    problems = []
    for question in questions:
        for name, text in _fields(question):
            for pattern in HEADER_FOOTER_PATTERNS:
                match = pattern.search(text)
                if match:
                    problems.append(
                        f"question {question.number} {name}: header/footer text '{match.group(0)}'"
                    )
    return problems


def swallowed_choices(questions: Sequence[ParsedQuestion]) -> list[str]:
    """Signs that segmentation missed a boundary.

    - the stem holds a choice marker "(A) Xxx" at a line start or two or more markers anywhere
      (the choices were glued to the stem);
    - a choice holds the marker of a later choice "(C) Xxx" (the next choice was glued to it);
    - a choice holds a stem's closing request "assinale a afirmativa/opção" (the next question
      leaked in; no choice of the real booklets contains it).
    A single "(A)" quoted inside a choice or the stem's prose is not reported.
    """
    problems = []
    for question in questions:
        markers = CHOICE_MARKER_RE.findall(question.stem)
        line_start = [m for m in re.findall(r"(?m)^\(?([A-D])\)\s", question.stem)]
        if len(markers) >= 2 or line_start:
            problems.append(
                f"question {question.number} stem contains choice markers {sorted(set(markers + line_start))}"
            )
        for index, (name, text) in enumerate(_fields(question)[1:]):
            later = [m for m in CHOICE_MARKER_RE.findall(text) if "ABCD".index(m) > index]
            if later:
                problems.append(
                    f"question {question.number} {name} contains the marker of choice ({later[0]})"
                )
            if STEM_CLOSING_RE.search(text):
                problems.append(
                    f"question {question.number} {name} contains a stem's 'assinale a ...' request"
                )
    return problems


def numbering_problems(questions: Sequence[ParsedQuestion], expected: int = 80) -> list[str]:
    """Count, duplicates, gaps and order of the question numbers against 1..expected."""
    numbers = [q.number for q in questions]
    problems = []
    if len(numbers) != expected:
        problems.append(f"{len(numbers)} questions, expected {expected}")
    duplicates = sorted(n for n, count in Counter(numbers).items() if count > 1)
    if duplicates:
        problems.append(f"duplicate question numbers {duplicates}")
    missing = sorted(set(range(1, expected + 1)) - set(numbers))
    if missing:
        problems.append(f"missing question numbers {missing}")
    extra = sorted(n for n in set(numbers) if not 1 <= n <= expected)
    if extra:
        problems.append(f"question numbers outside 1..{expected}: {extra}")
    if numbers != sorted(numbers):
        problems.append("questions are not in ascending order")
    return problems


def empty_fields(questions: Sequence[ParsedQuestion]) -> list[str]:
    """Blank stems or choices, and questions without pages."""
    problems = [
        f"question {question.number} {name} is empty"
        for question in questions
        for name, text in _fields(question)
        if not text.strip()
    ]
    problems += [f"question {q.number} has no page numbers" for q in questions if not q.pages]
    return problems


def area_sanity(
    questions_with_area: Sequence[tuple[int, str, str]], *, min_share: float = MIN_AREA_SHARE
) -> list[str]:
    """Warnings for areas whose questions rarely mention the area's typical words.

    `questions_with_area` holds (question number, area name, full question text — stem plus
    choices). For each area matching a rule of AREA_KEYWORDS (one per canonical area of the
    registry), the share of its questions mentioning a keyword is computed; below `min_share` a
    warning gives the share and the questions without a keyword. Areas without a rule are not
    judged. These are warnings:
    a low share suggests shifted area ranges or mis-numbered questions, not a certain error.
    """
    by_area: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for number, area, text in questions_with_area:
        by_area[area].append((number, text))
    warnings = []
    for area, items in sorted(by_area.items()):
        for area_re, keyword_re, description in AREA_KEYWORDS:
            if not area_re.search(area):
                continue
            without = [number for number, text in items if not keyword_re.search(text)]
            share = 1 - len(without) / len(items)
            if share < min_share:
                warnings.append(
                    f"{area}: only {len(items) - len(without)}/{len(items)} questions ({share:.0%}) mention "
                    f"{description}; questions without: {without}"
                )
            break
    return warnings

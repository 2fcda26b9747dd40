"""The site's words in Portuguese (default: the audience) and English, and how numbers are written in each.

Portuguese writes `85,0%`, `US$ 0,00919` and `10.036,5 ms`; English `85.0%`, `$0.00919` and `10,036.5 ms`. The
figures are the warehouse's, rounded for display only (the Dados page has every value at full precision).
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from oabench_pipeline.core.numbers import grouped, short_decimal

Lang = Literal["pt", "en"]
LANGS: tuple[Lang, ...] = ("pt", "en")

NO_VALUE = "—"

# key: (Portuguese, English)
_LABELS: dict[str, tuple[str, str]] = {
    "site_title": (
        "OABench: modelos de linguagem no Exame de Ordem",
        "OABench: language models on the Bar Exam",
    ),
    "home": ("Início", "Home"),
    "methodology": ("Metodologia", "Methodology"),
    "data": ("Dados", "Data"),
    "model": ("Modelo", "Model"),
    "models": ("Modelos", "Models"),
    "edition": ("Edição", "Edition"),
    "editions": ("Edições", "Editions"),
    "question": ("Questão", "Question"),
    "questions": ("Questões", "Questions"),
    "rank": ("Posição", "Rank"),
    "rank_range": ("Faixa", "Range"),
    "tie_group": ("Grupo", "Group"),
    "key": ("Chave", "Key"),
    "score": ("Pontos", "Score"),
    "accuracy": ("Acurácia oficial", "Official accuracy"),
    "interval": ("IC 95%", "95% CI"),
    "technical": ("Acurácia técnica", "Technical accuracy"),
    "editions_passed": ("Edições aprovadas", "Editions passed"),
    "p_pass": ("P(aprovação em todas)", "P(pass all)"),
    "cost": ("Custo", "Cost"),
    "p50_latency": ("Latência p50", "p50 latency"),
    "p95_latency": ("Latência p95", "p95 latency"),
    "avg_latency": ("Latência média", "Mean latency"),
    "strict_compliance": ("Conformidade estrita", "Strict compliance"),
    "tokens": ("Tokens", "Tokens"),
    "prompt_tokens": ("Tokens de entrada", "Prompt tokens"),
    "completion_tokens": ("Tokens de saída", "Completion tokens"),
    "reasoning_tokens": ("Tokens de raciocínio", "Reasoning tokens"),
    "invalid": ("Inválidas", "Invalid"),
    "missing": ("Faltantes", "Missing"),
    "passed": ("Aprovado", "Passed"),
    "failed": ("Reprovado", "Failed"),
    "yes": ("sim", "yes"),
    "no": ("não", "no"),
    "incomplete": ("incompleto", "incomplete"),
    "incomplete_note": (
        "incompleto: nem toda questão respondida, por isso sem posição",
        "incomplete: not every question answered, so unranked",
    ),
    "estimated": ("estimado", "estimated"),
    "estimated_note": (
        "custo estimado: tokens × uma tabela de preços (nem toda chamada informou seu custo)",
        "estimated cost: tokens × a price snapshot (not every call reported its cost)",
    ),
    "tie_note": (
        "Modelos com uma letra de grupo em comum não diferem significativamente (McNemar exato, Holm, 5%); "
        "a faixa é a melhor e a pior posição que os testes permitem.",
        "Models sharing a group letter do not differ significantly (exact McNemar, Holm, 5%); the range is "
        "the best and worst rank the tests allow.",
    ),
    "leaderboard": ("Classificação", "Leaderboard"),
    "frontier": ("Custo × acurácia (fronteira de Pareto)", "Cost vs accuracy (Pareto frontier)"),
    "frontier_missing": ("Sem custo conhecido (fora do gráfico)", "No known cost (not plotted)"),
    "area_chart": ("Acurácia por área do direito", "Accuracy by legal area"),
    "data_as_of": ("Dados até", "Data as of"),
    "answers_from": ("respostas de", "answers from"),
    "newest_answer": ("resposta mais recente", "newest answer"),
    "no_answers": ("nenhuma resposta ainda", "no answers yet"),
    "suite": ("Conjunto", "Suite"),
    "suites": ("Conjuntos de edições", "Edition suites"),
    "per_edition": ("Por edição", "Per edition"),
    "per_area": ("Por área", "Per area"),
    "area": ("Área", "Area"),
    "correct": ("Acertos", "Correct"),
    "of": ("de", "of"),
    "latency_distribution": ("Distribuição da latência", "Latency distribution"),
    "runs": ("Execuções e réplicas", "Runs and replicates"),
    "run": ("Execução", "Run"),
    "source": ("Origem", "Source"),
    "replicate": ("Réplica", "Replicate"),
    "started": ("Início", "Started"),
    "completed": ("Concluída", "Completed"),
    "complete": ("Completa", "Complete"),
    "counted": ("contada", "counted"),
    "spread": ("Variação entre réplicas", "Spread over replicates"),
    "flip_rate": ("Respostas que mudam", "Answers that flip"),
    "score_sd": ("Desvio padrão", "Standard deviation"),
    "missed": ("Questões erradas", "Questions missed"),
    "missed_none": ("Nenhuma questão errada.", "No question missed."),
    "its_answer": ("Resposta dada", "Its answer"),
    "official_answer": ("Gabarito oficial", "Official answer"),
    "no_answer": ("sem resposta", "no answer"),
    "no_answer_note": (
        "Nenhuma alternativa lida na resposta: conta como não acertada.",
        "No letter read in the reply: counted as not right.",
    ),
    "files": ("Arquivos oficiais", "Official files"),
    "booklet": ("Caderno de prova", "Question booklet"),
    "answer_key": ("Gabarito", "Answer key"),
    "key_status": ("Situação do gabarito", "Key status"),
    "definitive": ("definitivo", "definitive"),
    "preliminary": ("preliminar", "preliminary"),
    "exam_date": ("Data da prova", "Exam date"),
    "exam_page": ("Página da prova no portal da OAB", "The exam's page on the OAB portal"),
    "bytes": ("Bytes", "Bytes"),
    "share_correct": ("Modelos que acertaram", "Models right"),
    "status": ("Situação", "Status"),
    "active": ("ativa", "active"),
    "annulled": ("anulada", "annulled"),
    "annulled_one": ("anulada", "annulled"),
    "annulled_many": ("anuladas", "annulled"),
    "unresolved": ("não resolvida", "unresolved"),
    "unresolved_note": (
        "O gabarito posterior é desconhecido e controverso: fora dos dois escores, oficial e técnico.",
        "Its later key is unknown and disputed: left out of both scores, official and technical.",
    ),
    "key_document": ("Documento do gabarito", "Key document"),
    "changed_after_preliminary": ("alterada após o gabarito preliminar", "changed after the preliminary key"),
    "preliminary_answer": ("no gabarito preliminar", "in the preliminary key"),
    "annulled_note": (
        "Anulada pela banca: creditada a todos os modelos (escore oficial), fora do escore técnico.",
        "Annulled by the examiners: credited to every model (official score), left out of the technical score.",
    ),
    "flag": ("Alerta", "Flag"),
    "suspicious_key": ("gabarito suspeito", "suspicious key"),
    "suspicious_note": (
        "A auditoria do gabarito (key_audit) o marca como suspeito: os modelos mais fortes, com votos "
        "pesados pela habilidade, concordam em outra letra; confira a questão no gabarito definitivo",
        "The key audit (key_audit) flags this key as suspicious: the strongest models, their votes weighted "
        "by ability, agree on another letter; check the question against the definitive key",
    ),
    "consensus": ("consenso", "consensus"),
    "law_currency": ("Direito posterior à prova", "Later law"),
    "read_with_care": ("ler com cuidado", "read with care"),
    "reforms_after": (
        "Reformas desta área em vigor depois da prova",
        "Reforms of this area in force after the exam",
    ),
    "in_force_since": ("em vigor desde", "in force since"),
    "law_flag_note": (
        "O alerta por área marca questões a ler com cuidado: uma reforma da área entrou em vigor depois da "
        "prova. Não é um juízo jurídico de que o gabarito oficial esteja errado hoje.",
        "The area-level flag marks questions to read with care: a reform of the area came into force after "
        "the exam. It is not a legal judgment that the official answer is wrong today.",
    ),
    "note_outdated": ("Superada por lei posterior, segundo", "Outdated by later law, according to"),
    "note_holds": ("Ainda vale, segundo", "Still holds, according to"),
    "current_law": ("Só direito vigente", "Current law only"),
    "current_law_intro": (
        "A mesma classificação só com as questões sem alerta de reforma posterior à prova "
        "(question_law_currency):",
        "The same ranking on the questions with no reform flagged after their exam (question_law_currency):",
    ),
    "rank_all_questions": ("Posição (todas)", "Rank (all)"),
    "accuracy_all_questions": ("Acurácia (todas)", "Accuracy (all)"),
    "flag_counts": ("Questões por alerta", "Questions by flag"),
    "hard": ("difícil", "hard"),
    "stem": ("Enunciado", "Stem"),
    "choices": ("Alternativas", "Choices"),
    "requires_image": (
        "A questão tem uma imagem no caderno (não enviada aos modelos).",
        "The question has a picture in the booklet (not sent to the models).",
    ),
    "answers_by_model": ("Respostas dos modelos", "Every model's answer"),
    "lenient": ("Leitura tolerante", "Lenient parse"),
    "strict": ("Leitura estrita", "Strict parse"),
    "reply": ("Resposta bruta (início)", "Raw reply (start)"),
    "chars": ("caracteres", "characters"),
    "result": ("Resultado", "Result"),
    "right": ("certa", "right"),
    "wrong": ("errada", "wrong"),
    "error": ("erro", "error"),
    "skipped": ("não perguntada (anulada)", "not asked (annulled)"),
    "previous": ("anterior", "previous"),
    "next": ("próxima", "next"),
    "downloads": ("Tabelas do armazém", "Warehouse tables"),
    "table": ("Tabela", "Table"),
    "rows": ("Linhas", "Rows"),
    "recompute": ("O SQL de cada número", "The SQL behind each figure"),
    "recompute_intro": (
        'Cada consulta roda em `oabench sql "..."` (ou no `duckdb warehouse/oabench.duckdb`) e refaz um '
        "número mostrado neste site a partir das respostas pontuadas.",
        'Each query runs in `oabench sql "..."` (or `duckdb warehouse/oabench.duckdb`) and recomputes a '
        "figure this site shows from the scored answers.",
    ),
    "generated_by": (
        "Gerado pelo OABench Pipeline a partir do armazém",
        "Built by OABench Pipeline from the warehouse",
    ),
    "sort_hint": ("Clique num título para ordenar.", "Click a heading to sort."),
    "provider": ("Fornecedor", "Provider"),
    "protocol": ("Protocolo", "Protocol"),
    "versions": ("Versões", "Versions"),
    "suite_home": ("Classificação do conjunto", "The suite's leaderboard"),
    # The 2nd phase and the candidates (core/site/phase2.py)
    "phase2": ("2ª fase", "2nd phase"),
    "phase2_leaderboard": (
        "2ª fase: peça e questões discursivas",
        "2nd phase: procedural piece and written questions",
    ),
    "phase2_intro": (
        "Na 2ª fase o candidato redige uma peça (5,00 pontos) e responde a 4 questões (1,25 cada) de uma área; "
        "passa com 6,00 de 10. Aqui um modelo juiz corrige cada resposta contra o padrão de resposta da banca: "
        "a nota é do juiz, não da banca.",
        "In the 2nd phase a candidate writes one procedural piece (5.00 points) and answers 4 questions (1.25 "
        "each) in one area; 6.00 of 10 passes. Here a judge model grades each answer against the examiners' "
        "answer standard: the score is the judge's, not the examiners'.",
    ),
    "judge": ("Juiz", "Judge"),
    "judges": ("Juízes", "Judges"),
    "mean_total": ("Média (de 10)", "Mean (of 10)"),
    "exams_passed": ("Provas aprovadas", "Exams passed"),
    "exams_complete": ("completas", "complete"),
    "invalid_judgments": ("Correções inválidas", "Invalid judgments"),
    "items": ("Itens", "Items"),
    "item": ("Item", "Item"),
    "piece": ("Peça", "Piece"),
    "sub_item": ("Item", "Sub-item"),
    "points": ("Pontos", "Points"),
    "statement": ("Enunciado", "Statement"),
    "standard": ("Padrão de resposta", "Answer standard"),
    "criteria": ("Distribuição dos pontos", "Points by criterion"),
    "allowed": ("Valores possíveis", "Allowed values"),
    "answer": ("Resposta", "Answer"),
    "correction": ("Correção", "Correction"),
    "invalid_judgment": ("inválida", "invalid"),
    "truncated": ("cortada no limite de tokens", "cut at the token ceiling"),
    "both_phases": ("As duas fases lado a lado", "Both phases side by side"),
    "phase1_score": ("1ª fase (acertos)", "1st phase (right)"),
    "phase2_mean": ("2ª fase (média, juiz {judge})", "2nd phase (mean, judge {judge})"),
    "phase1_missing": (
        "Os cadernos da 1ª fase desta edição não estão no armazém (os da 39ª–41ª não estão nos dados "
        "compartilhados), então não há nota da 1ª fase para pôr ao lado.",
        "This edition's 1st-phase booklets are not in the warehouse (the 39th-41st are not in the shared "
        "data), so there is no 1st-phase score to put beside it.",
    ),
    "judges_compared": ("Juízes comparados", "Judges compared"),
    "answers_compared": ("Respostas", "Answers"),
    "mae": ("Erro absoluto médio", "Mean absolute difference"),
    "pass_disagreement": ("Discordam em aprovar", "Disagree on pass"),
    "candidates": ("Candidatos", "Candidates"),
    "candidates_pass_rate": ("Aprovação dos candidatos na 1ª fase", "Candidates' 1st-phase pass rate"),
    "no_pass_rate": (
        "Nenhuma taxa verificada desta edição.",
        "No verified rate for this edition.",
    ),
    "pass_rate_caveat": (
        "A taxa de aprovação conta quem passou na 1ª fase (40 de 80); não é uma distribuição de notas, e "
        "nenhum dado de candidatos por questão é público, então os modelos não podem ser situados entre os "
        "candidatos.",
        "A pass rate counts the candidates who passed the 1st phase (40 of 80); it is not a distribution of "
        "scores, and no per-question data of candidates is public, so models cannot be placed among candidates.",
    ),
    "denominator": ("Sobre", "Of"),
    "denominator_present": ("presentes", "present"),
    "denominator_inscribed": ("inscritos", "inscribed"),
    "denominator_inscribed_approx": ("inscritos (aprox.)", "inscribed (approx.)"),
    "denominator_present_approx": ("presentes (aprox.)", "present (approx.)"),
    "denominator_not_given": ("não informado", "not given"),
    "stage_final": ("definitivo", "final"),
    "stage_preliminary": ("preliminar", "preliminary"),
    "approved_count": ("aprovados", "approved"),
}


def label(key: str, lang: Lang) -> str:
    portuguese, english = _LABELS[key]
    return portuguese if lang == "pt" else english


def number(value: float, decimals: int, lang: Lang) -> str:
    """`1,234.5` in English, `1.234,5` in Portuguese."""
    text = f"{value:,.{decimals}f}"
    return text if lang == "en" else text.translate(str.maketrans(",.", ".,"))


def pct(value: float | None, lang: Lang, decimals: int = 1) -> str:
    return NO_VALUE if value is None else number(100 * value, decimals, lang) + "%"


def interval(low: float | None, high: float | None, lang: Lang) -> str:
    if low is None or high is None:
        return NO_VALUE
    return f"{number(100 * low, 1, lang)}–{number(100 * high, 1, lang)}"


def usd(value: float | None, lang: Lang) -> str:
    """Dollars with the terminal's digits (`core/numbers.py`): `US$ 0,1812`, `US$ 0,00919`, `$0.00919`."""
    if value is None:
        return NO_VALUE
    digits = short_decimal(value)
    return ("US$ " + digits.replace(".", ",")) if lang == "pt" else "$" + digits


def ms(value: float | None, lang: Lang) -> str:
    """Milliseconds with the terminal's digits (a median of two calls ends in .5): `10.036,5 ms`."""
    if value is None:
        return NO_VALUE
    return (grouped(value, ".", ",") if lang == "pt" else grouped(value)) + " ms"


def integer(value: int | None, lang: Lang) -> str:
    return NO_VALUE if value is None else number(value, 0, lang)


def moment(value: dt.datetime | None) -> str:
    if value is None:
        return NO_VALUE
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC)
    return value.strftime("%Y-%m-%d %H:%M UTC")


class Words:
    """The labels and number formats of one language, as the templates call them (`t(...)`, `f.pct(...)`)."""

    def __init__(self, lang: Lang) -> None:
        self.lang = lang

    def t(self, key: str) -> str:
        return label(key, self.lang)

    def pct(self, value: float | None, decimals: int = 1) -> str:
        return pct(value, self.lang, decimals)

    def interval(self, low: float | None, high: float | None) -> str:
        return interval(low, high, self.lang)

    def cost(self, value: float | None, source: str | None = None) -> str:
        """`effective_cost_usd`, marked `~` when it is an estimate (the footnote says so)."""
        return usd(value, self.lang) + ("~" if source == "estimated" and value is not None else "")

    def ms(self, value: float | None) -> str:
        return ms(value, self.lang)

    def points(self, value: float | None, decimals: int = 2) -> str:
        """Exam points, `8,52` in Portuguese; NO_VALUE for none."""
        return NO_VALUE if value is None else number(value, decimals, self.lang)

    def integer(self, value: int | None) -> str:
        return integer(value, self.lang)


# The descriptions of the suites the pipeline ships (registry/editions.toml), in Portuguese, keyed by the
# registry's English text: a description edited in the registry (or a suite of one's own) shows as written
# there, never as a translation of what it used to say.
SUITE_DESCRIPTIONS_PT: dict[str, str] = {
    "The OABench study (March 2026): the 43rd-45th editions, held in 2025": (
        "O estudo OABench (março de 2026): a 43ª, a 44ª e a 45ª edições, aplicadas em 2025"
    ),
    "Every FGV exam of the 2010s the archive holds: the 2nd (2010.2, FGV's first) to the 26th (2018) and "
    "the 28th (2019)": (
        "Todos os exames da FGV dos anos 2010 que o arquivo guarda: do 2º (2010.2, o primeiro da FGV) ao "
        "26º (2018) e o 28º (2019)"
    ),
    "Every exam of the 2020s the archive holds: the 36th-38th (2022-2023) and the study's 43rd-45th (2025)": (
        "Todos os exames dos anos 2020 que o arquivo guarda: do 36º ao 38º (2022-2023) e os do estudo, do 43º "
        "ao 45º (2025)"
    ),
    "Every edition the editions registry and the portal sensor know": (
        "Todas as edições que o registro de edições e o sensor do portal conhecem"
    ),
}

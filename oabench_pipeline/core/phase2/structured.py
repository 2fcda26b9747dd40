"""The structured judge (`oabench judge --structured`): points per criterion of the answer standard, as JSON.

The judge is shown the standard and its distribution table as numbered criteria, each with its allowed
values, and answers with `{"points": [p1, p2, ...]}`, one value per criterion. A reply is valid when it
holds exactly that: one value per criterion, each one of the criterion's allowed values. Its score is the
sum. Anything else is invalid (no score, never 0), as an unparseable free-text judgment is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

STRUCTURED_PROMPT = "structured-oab-v1"
TOLERANCE = 1e-9  # float noise: 0.1 + 0.2 is an allowed 0.3
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


@dataclass(frozen=True)
class Criterion:
    """One row of a standard's distribution table (`phase2_standards.criteria`)."""

    text: str
    max_points: float
    allowed: tuple[float, ...]


@dataclass(frozen=True)
class StructuredScore:
    score: float | None
    valid: bool
    criteria_points: tuple[float, ...] | None = None
    invalid_reason: str | None = None


def _points(value: float) -> str:
    return f"{value:.2f}".replace(".", ",")


def structured_user_prompt(
    question: str, standard: str, criteria: list[Criterion], answer: str, points: float
) -> str:
    """The user prompt: the question, the standard, the numbered criteria with their allowed values, the
    answer, and the JSON shape the judge must answer with."""
    rows = "\n".join(
        f"{n}. {c.text} — valores permitidos: {' / '.join(_points(v) for v in c.allowed)}"
        for n, c in enumerate(criteria, start=1)
    )
    return (
        "[Instrução]\nVocê faz parte da banca examinadora da FGV responsável por avaliar as respostas dos "
        "bacharéis em direito na segunda fase da prova da OAB. Compare a resposta do candidato com o padrão "
        "de respostas e atribua a cada critério da tabela de distribuição de pontos um dos seus valores "
        f"permitidos. A nota máxima deste item é {_points(points)}.\n"
        f'Responda apenas com um objeto JSON: {{"points": [...]}}, com exatamente {len(criteria)} números, '
        "um por critério, na ordem da tabela.\n\n"
        f"[Pergunta da OAB]\n{question}\n\n"
        f"[Início do Padrão de Respostas]\n{standard}\n[Fim do Padrão de Respostas]\n\n"
        f"[Critérios]\n{rows}\n\n"
        f"[Início da Resposta do Candidato]\n{answer}\n[Fim da Resposta do Candidato]"
    )


def parse_structured(text: str | None, criteria: list[Criterion], max_points: float) -> StructuredScore:
    """Validate a structured judgment: one allowed value per criterion; the score is their sum."""
    found = _JSON_OBJECT.search(text or "")
    if found is None:
        return StructuredScore(None, False, invalid_reason="no JSON object in the judgment")
    try:
        data: Any = json.loads(found.group(0))
    except json.JSONDecodeError:
        return StructuredScore(None, False, invalid_reason="the judgment's JSON does not parse")
    values = data.get("points") if isinstance(data, dict) else None
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    ):
        return StructuredScore(None, False, invalid_reason='no list of numbers under "points"')
    if len(values) != len(criteria):
        return StructuredScore(
            None, False, invalid_reason=f"{len(values)} value(s) for {len(criteria)} criteria"
        )
    for n, (value, criterion) in enumerate(zip(values, criteria, strict=True), start=1):
        if not any(abs(value - allowed) <= TOLERANCE for allowed in criterion.allowed):
            return StructuredScore(
                None, False, invalid_reason=f"criterion {n}: {value} is not one of its allowed values"
            )
    score = round(sum(float(v) for v in values), 2)
    if score > max_points + TOLERANCE:
        return StructuredScore(None, False, invalid_reason=f"sum {score} above the {max_points:.2f} points")
    return StructuredScore(score, True, tuple(float(v) for v in values))

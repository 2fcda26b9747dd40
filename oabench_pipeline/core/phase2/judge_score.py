"""The score a judge gave: the first `[[n]]` of its judgment, comma or dot decimal (OAB-Bench's format).

A judgment with no `[[n]]`, or whose score is above the sub-item's points, is invalid: its score is None,
never 0, so an exam with one is incomplete rather than failed (docs/phase2.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# `[[0.60]]`, `[[0,6]]`, `[[ 1 ]]`, `[[-1]]` (FastChat's "no rating"): a number, nothing else, in double brackets.
_BRACKETED_SCORE = re.compile(r"\[\[\s*(-?\d+(?:[.,]\d+)?)\s*\]\]")
_TOLERANCE = 1e-9

NO_SCORE = "no [[score]] in the judgment"


@dataclass(frozen=True)
class JudgeScore:
    score: float | None
    valid: bool
    invalid_reason: str | None


def parse_judge_score(text: str | None, max_points: float) -> JudgeScore:
    """The judgment's score (the first `[[n]]`), valid when 0 <= n <= `max_points`."""
    match = _BRACKETED_SCORE.search(text or "")
    if match is None:
        return JudgeScore(None, False, NO_SCORE)
    score = float(match[1].replace(",", "."))
    if score < 0:
        return JudgeScore(None, False, f"score {match[1]} is below 0")
    if score > max_points + _TOLERANCE:
        return JudgeScore(None, False, f"score {match[1]} is above the sub-item's {max_points:.2f} points")
    return JudgeScore(score, True, None)

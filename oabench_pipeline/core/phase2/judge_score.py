"""The score in a judge's correction: the first `[[n]]` (comma or dot decimal), within the sub-item's points.

A judgment without one, or whose score is above the sub-item's points, is invalid: it has no score (NULL),
never 0, and is counted as invalid wherever scores are summed (`phase2_scores.invalid`). OAB-Bench falls
back to a single-bracket `[n]` anywhere in the text; that fallback is not taken here, as it picks up
citations (`[1]`) and article numbers as scores.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SCORE_PATTERN = re.compile(r"\[\[\s*(\d+(?:[.,]\d*)?)\s*\]\]")
TOLERANCE = 1e-9  # 0.1 + 0.2 style float noise: a score equal to the points is not "above" them


@dataclass(frozen=True)
class JudgeScore:
    score: float | None
    valid: bool
    invalid_reason: str | None = None


def parse_judge_score(text: str | None, max_points: float) -> JudgeScore:
    """The first `[[n]]` of `text` as points, valid when 0 <= n <= `max_points`."""
    match = SCORE_PATTERN.search(text or "")
    if match is None:
        return JudgeScore(None, False, "no [[score]] in the judgment")
    score = float(match.group(1).replace(",", "."))
    if score > max_points + TOLERANCE:
        return JudgeScore(None, False, f"score {match.group(1)} above the sub-item's {max_points:.2f} points")
    return JudgeScore(score, True)

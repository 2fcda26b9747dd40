"""OAB-Bench's published answers (`model_answer/<model>.jsonl`) and judgments
(`model_judgment/<judge>_single.jsonl`), read for `oabench import` (FastChat's formats).

An answer line holds one item: `question_id`, `model_id`, `choices[0].turns` (one reply per sub-item). A
judgment line holds one sub-item: `question_id`, `model` (the judged model), `judge` ([judge, prompt name]),
`judgment` (the text), `score` (what OAB-Bench recorded) and `turn`. The score kept is the first `[[n]]` of
the text (`parse_judge_score`); where the text has none, the file's recorded score is kept and the row says
so (`score_source` 'recorded'); where both exist and differ, the text wins and the difference is counted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from oabench_pipeline.core.models_registry import key_problem
from oabench_pipeline.core.phase2.items import Phase2DataError, Phase2Item, jsonl_records
from oabench_pipeline.core.phase2.judge_score import NO_SCORE, parse_judge_score

ANSWERS_DIR = "model_answer"
JUDGMENTS_DIR = "model_judgment"
JUDGMENT_SUFFIX = "_single.jsonl"
_COMMIT = re.compile(r"[0-9a-f]{40}")
_TOLERANCE = 1e-9


def is_oab_bench_folder(path: Path) -> bool:
    """OAB-Bench's layout: a `model_answer/` folder beside `question.jsonl` (not OABench run folders)."""
    return (path / ANSWERS_DIR).is_dir() and (path / "question.jsonl").is_file()


@dataclass(frozen=True)
class ImportedAnswer:
    model_key: str
    item: Phase2Item
    turn: int
    answer: str
    source: str


@dataclass(frozen=True)
class ImportedJudgment:
    judge_key: str
    model_key: str
    item: Phase2Item
    turn: int
    prompt_name: str
    judgment: str
    score: float | None
    valid: bool
    invalid_reason: str | None
    recorded_score: float | None
    score_source: str | None
    source: str

    @property
    def max_points(self) -> float:
        return self.item.turn_points[self.turn - 1]

    @property
    def disagrees(self) -> bool:
        """The text's `[[n]]` and the file's recorded score are both there and differ."""
        return (
            self.score_source == "judgment"
            and self.recorded_score is not None
            and abs(self.recorded_score - (self.score or 0.0)) > _TOLERANCE
        )


def run_label(parts: tuple[str, ...], folder_name: str) -> str:
    """OAB-Bench's commit when the folder's path names one (`.../oab-bench/<commit>/data/oab_bench`), else the
    folder's name: what `oab-bench:<label>` run ids and sources say."""
    commits = [p for p in parts if _COMMIT.fullmatch(p)]
    return commits[-1] if commits else folder_name


def _model_key(value: object, where: str, what: str) -> str:
    if not isinstance(value, str):
        raise Phase2DataError(f"{where}: {what} missing or not text")
    if problem := key_problem(value):
        raise Phase2DataError(f"{where}: {what} {problem}")
    return value


def _item(items: Mapping[str, Phase2Item], record: dict, where: str) -> Phase2Item:
    item_id = record.get("question_id")
    if not isinstance(item_id, str) or item_id not in items:
        raise Phase2DataError(f"{where}: question_id {item_id!r} is not an ingested phase-2 item")
    return items[item_id]


def parse_answer_file(text: str, source: str, items: Mapping[str, Phase2Item]) -> list[ImportedAnswer]:
    """One answer per sub-item of each line; `source` names the file in errors and rows."""
    answers: list[ImportedAnswer] = []
    seen: set[str] = set()
    model_keys: set[str] = set()
    for number, record in jsonl_records(text, source):
        where = f"{source} line {number}"
        item = _item(items, record, where)
        model_key = _model_key(record.get("model_id"), where, "model_id")
        model_keys.add(model_key)
        if item.item_id in seen:
            raise Phase2DataError(f"{where}: item {item.item_id} answered twice")
        seen.add(item.item_id)
        choices = record.get("choices")
        turns = (
            choices[0].get("turns")
            if isinstance(choices, list) and choices and isinstance(choices[0], dict)
            else None
        )
        if not isinstance(turns, list) or len(turns) != len(item.turn_points):
            raise Phase2DataError(
                f"{where}: choices[0].turns must hold {len(item.turn_points)} repl(ies) for {item.item_id}"
            )
        if not all(isinstance(t, str) for t in turns):
            raise Phase2DataError(f"{where}: a reply of {item.item_id} is not text")
        answers.extend(
            ImportedAnswer(model_key, item, turn, reply, source) for turn, reply in enumerate(turns, start=1)
        )
    if len(model_keys) > 1:
        raise Phase2DataError(f"{source}: answers of several models ({', '.join(sorted(model_keys))})")
    if not answers:
        raise Phase2DataError(f"{source}: no answers")
    return answers


def _recorded(value: object, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise Phase2DataError(f"{where}: score {value!r} is not a number")
    return float(value)


def judgment_scores(
    text: str, recorded: float | None, max_points: float
) -> tuple[float | None, bool, str | None, str | None]:
    """(score, valid, invalid_reason, score_source) of an imported judgment: the text's first `[[n]]`, else
    the file's recorded score when it is within the sub-item's points."""
    parsed = parse_judge_score(text, max_points)
    if parsed.valid:
        return parsed.score, True, None, "judgment"
    if (
        parsed.invalid_reason == NO_SCORE
        and recorded is not None
        and 0 <= recorded <= max_points + _TOLERANCE
    ):
        return recorded, True, None, "recorded"
    return None, False, parsed.invalid_reason, None


def parse_judgment_file(text: str, source: str, items: Mapping[str, Phase2Item]) -> list[ImportedJudgment]:
    """Every judgment of the file, scored (`judgment_scores`); a sub-item judged twice is refused."""
    judgments: list[ImportedJudgment] = []
    seen: set[tuple[str, str, str, int]] = set()
    for number, record in jsonl_records(text, source):
        where = f"{source} line {number}"
        item = _item(items, record, where)
        judge = record.get("judge")
        if not (isinstance(judge, list) and len(judge) == 2 and all(isinstance(j, str) for j in judge)):
            raise Phase2DataError(f"{where}: judge {judge!r} is not [judge model, prompt name]")
        judge_key = _model_key(judge[0], where, "judge")
        model_key = _model_key(record.get("model"), where, "model")
        turn = record.get("turn")
        if not isinstance(turn, int) or isinstance(turn, bool) or not 1 <= turn <= len(item.turn_points):
            raise Phase2DataError(f"{where}: turn {turn!r} is not a sub-item of {item.item_id}")
        identity = (judge_key, model_key, item.item_id, turn)
        if identity in seen:
            raise Phase2DataError(f"{where}: {model_key}'s {item.item_id} sub-item {turn} judged twice")
        seen.add(identity)
        text_value = record.get("judgment")
        if not isinstance(text_value, str):
            raise Phase2DataError(f"{where}: judgment missing or not text")
        recorded = _recorded(record.get("score"), where)
        score, valid, reason, score_source = judgment_scores(text_value, recorded, item.turn_points[turn - 1])
        judgments.append(
            ImportedJudgment(
                judge_key=judge_key,
                model_key=model_key,
                item=item,
                turn=turn,
                prompt_name=judge[1],
                judgment=text_value,
                score=score,
                valid=valid,
                invalid_reason=reason,
                recorded_score=recorded,
                score_source=score_source,
                source=source,
            )
        )
    if not judgments:
        raise Phase2DataError(f"{source}: no judgments")
    return judgments

"""What a 2nd-phase cell sends and the rows it ends with (no Dagster: `answers.py` and `judgments.py` call these).

Answers: one conversation per item. A turn's request is known only once every earlier turn has a reply in
the response log (sub-item B's request carries sub-item A's reply), so a cell is sent in rounds: all first
turns, then the second turns whose first has a reply. A rerun rebuilds the same requests from the log and
sends only those with no reply: nothing is paid twice.

Judgments: one request per sub-item whose answer is complete up to it. `--retry-invalid` asks again a
judgment that is invalid, under a new request hash (its retry index), so the earlier one stays in the log.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.core.phase2.judge_score import parse_judge_score
from oabench_pipeline.core.phase2.protocol import (
    ANSWER_TEMPERATURE,
    JudgeTemplate,
    Phase2Item,
    answer_messages,
    first_user_message,
    judge_messages,
    judge_prompt_name,
    judge_temperature,
    judge_user_prompt,
    phase2_request_hash,
    request_body,
)
from oabench_pipeline.core.phase2.structured import (
    STRUCTURED_PROMPT,
    Criterion,
    parse_structured,
    structured_user_prompt,
)
from oabench_pipeline.inference.cell_lock import cell_lock_path
from oabench_pipeline.inference.response_log import cell_log_path
from oabench_pipeline.inference.types import ChatRequest, ChatResult

LIVE_SOURCE = "live"
ANSWER_REPLICATE = 1  # one live run of a model's 2nd phase: `live:<key>:r1`
NOT_ASKED = "not asked: the earlier sub-item of the conversation has no reply"


def answers_log_path(warehouse_root: Path, model_key: str, edition: str) -> Path:
    """`responses/phase2/<model>/<edition>.jsonl`: every reply of one model to one edition's 2nd phase."""
    return cell_log_path(warehouse_root / "responses" / "phase2", model_key, edition)


def answers_lock_path(warehouse_root: Path, model_key: str, edition: str) -> Path:
    return cell_lock_path(warehouse_root / "phase2", model_key, edition)


def judgments_log_path(warehouse_root: Path, judge_key: str, model_key: str) -> Path:
    """`responses/judgments/<judge>/<model>.jsonl`: every judgment one judge gave of one model's answers."""
    return cell_log_path(warehouse_root / "responses" / "judgments", judge_key, model_key)


def judgments_lock_path(warehouse_root: Path, judge_key: str, model_key: str) -> Path:
    return cell_lock_path(warehouse_root / "judgments", judge_key, model_key)


def items_from_frame(frame: pl.DataFrame) -> list[Phase2Item]:
    """`phase2_items` rows as items, in item order."""
    return [
        Phase2Item(
            item_id=row["item_id"],
            edition=int(row["edition"]),
            area=row["area"],
            kind=row["kind"],
            statement=row["statement"],
            system=row["system"],
            turn_prompts=tuple(row["turn_prompts"]),
            turn_points=tuple(float(p) for p in row["turn_points"]),
        )
        for row in frame.sort("item_id").iter_rows(named=True)
    ]


def recorded_ceiling(existing: pl.DataFrame, run_id: str) -> int | None:
    """The ceiling the cell's live run was asked with: a rerun without `--max-completion-tokens` keeps it
    (and so its request hashes: nothing is asked again)."""
    if existing.is_empty():
        return None
    ceilings = existing.filter(pl.col("run_id") == run_id)["max_completion_tokens"].drop_nulls()
    return int(ceilings.mode().sort()[-1]) if not ceilings.is_empty() else None


def edition_items(frame: pl.DataFrame, edition: str) -> pl.DataFrame:
    """The `phase2_items` rows of one edition (every partition read: it does not depend on how they are split)."""
    return frame.filter(pl.col("edition") == int(edition)) if not frame.is_empty() else frame


def request_id(item_id: str, turn: int) -> str:
    """The `qid` of a 2nd-phase request in the response log: the item and its turn."""
    return f"{item_id}#{turn}"


def _paid(result: ChatResult) -> float | None:
    return result.total_cost_usd if result.total_cost_usd is not None else result.cost_usd


# ------------------------------------------------------------------------------------------------ answers


@dataclass(frozen=True)
class AnswerRound:
    """The requests known now (each item's turns up to its first without a reply) and those to send."""

    requests: dict[tuple[str, int], ChatRequest]
    pending: list[ChatRequest]


def answer_request(
    model: ModelConfig, item: Phase2Item, turn: int, replies: list[str], ceiling: int | None
) -> ChatRequest:
    body = request_body(
        model.id,
        answer_messages(item, turn, replies),
        ANSWER_TEMPERATURE,
        ceiling,
        model.reasoning_effort,
        model.web_search,
    )
    return ChatRequest(qid=request_id(item.item_id, turn), body=body, request_hash=phase2_request_hash(body))


def answer_round(
    model: ModelConfig, items: Iterable[Phase2Item], logged: dict[str, ChatResult], ceiling: int | None
) -> AnswerRound:
    """Walk each item's conversation through the log: a turn with a reply gives the next turn's request."""
    requests: dict[tuple[str, int], ChatRequest] = {}
    pending: list[ChatRequest] = []
    for item in items:
        replies: list[str] = []
        for turn in range(1, item.turns + 1):
            request = answer_request(model, item, turn, replies, ceiling)
            requests[(item.item_id, turn)] = request
            done = logged.get(request.request_hash)
            if done is None or not done.ok:
                pending.append(request)
                break
            replies.append(done.raw_response or "")
    return AnswerRound(requests, pending)


def answer_rows(
    model: ModelConfig,
    items: Iterable[Phase2Item],
    logged: dict[str, ChatResult],
    ceiling: int | None,
    run_id: str,
) -> list[dict[str, Any]]:
    """One row per item and turn: the reply kept in the log, its error, or why it was not asked."""
    known = answer_round(model, items, logged, ceiling).requests
    rows = []
    for item in items:
        for turn in range(1, item.turns + 1):
            row: dict[str, Any] = {
                "model_key": model.key,
                "edition": item.edition,
                "item_id": item.item_id,
                "area": item.area,
                "turn": turn,
                "run_id": run_id,
                "max_completion_tokens": ceiling,
                "source": LIVE_SOURCE,
            }
            request = known.get((item.item_id, turn))
            result = logged.get(request.request_hash) if request is not None else None
            if request is None:
                row["error"] = NOT_ASKED
            elif result is None:
                row |= {"request_hash": request.request_hash, "error": "no reply yet (stopped before it)"}
            else:
                finish = result.provenance.finish_reason
                row |= {
                    "request_hash": request.request_hash,
                    "answer": result.raw_response if result.ok else None,
                    "reasoning": result.reasoning,
                    "finish_reason": finish,
                    "truncated": finish == "length" if result.ok else None,
                    "prompt_tokens": result.prompt_tokens,
                    "completion_tokens": result.completion_tokens,
                    "reasoning_tokens": result.reasoning_tokens,
                    "cost_usd": _paid(result),
                    "latency_ms": result.latency_ms,
                    "error": result.error,
                    "answered_at": result.finished_at,
                    "batch_id": result.batch_id,
                }
            rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------- judgments


@dataclass(frozen=True)
class Standard:
    """A sub-item's answer standard (`phase2_standards`): the published text and its parsed criteria."""

    text: str
    criteria: tuple[Criterion, ...] = ()


@dataclass(frozen=True)
class JudgeSetup:
    judge: ModelConfig
    templates: dict[str, JudgeTemplate]
    ceiling: int | None
    structured: bool = False


@dataclass(frozen=True)
class Judgment:
    """One sub-item to judge: the request and the chain of retries it has in the log."""

    item: Phase2Item
    turn: int
    answer_run_id: str
    body: dict[str, Any]
    prompt_name: str
    retries: int
    """Retries with a final reply in the log: the judgment kept is the latest (index `retries - 1`)."""
    pending: ChatRequest | None

    def hash_at(self, retry: int) -> str:
        return phase2_request_hash(self.body, retry)


def judge_body(
    setup: JudgeSetup, item: Phase2Item, turn: int, standards: list[Standard], answers: list[str]
) -> tuple[dict[str, Any], str]:
    """The judge's request body for turn `turn` of `item`, and the prompt's name."""
    judge = setup.judge
    if setup.structured:
        standard = standards[turn - 1]
        question = first_user_message(item) if turn == 1 else item.turn_prompts[turn - 1]
        template = setup.templates[judge_prompt_name(1)]
        user = structured_user_prompt(
            question, standard.text, list(standard.criteria), answers[turn - 1], item.turn_points[turn - 1]
        )
        messages, name = judge_messages(template.system_prompt, user), STRUCTURED_PROMPT
    else:
        name = judge_prompt_name(turn)
        template = setup.templates[name]
        user = judge_user_prompt(template, item, [s.text for s in standards], answers[:turn], turn)
        messages = judge_messages(template.system_prompt, user)
    body = request_body(
        judge.id, messages, judge_temperature(judge.id), setup.ceiling, judge.reasoning_effort, False
    )
    return body, name


def verdict(
    setup: JudgeSetup, judgment: Judgment, text: str | None, standards: list[Standard]
) -> dict[str, Any]:
    """Score, validity and why not, of a judge's reply."""
    points = judgment.item.turn_points[judgment.turn - 1]
    if setup.structured:
        criteria = list(standards[judgment.turn - 1].criteria)
        if not criteria:
            return {"score": None, "valid": False, "invalid_reason": "the standard has no parsed criteria"}
        parsed = parse_structured(text, criteria, points)
        return {
            "score": parsed.score,
            "valid": parsed.valid,
            "invalid_reason": parsed.invalid_reason,
            "criteria_points": list(parsed.criteria_points) if parsed.criteria_points else None,
        }
    score = parse_judge_score(text, points)
    return {"score": score.score, "valid": score.valid, "invalid_reason": score.invalid_reason}


def plan_judgments(
    setup: JudgeSetup,
    items: dict[str, Phase2Item],
    standards: dict[str, list[Standard]],
    answers: dict[str, tuple[str, list[str]]],
    logged: dict[str, ChatResult],
    retry_invalid: bool = False,
) -> list[Judgment]:
    """Every sub-item with an answer to judge (item id → (answer run, replies per turn)), with what to send:
    no final judgment in the log, or (`retry_invalid`) an invalid one, asked again as the next retry."""
    planned = []
    for item_id, (run_id, replies) in sorted(answers.items()):
        item = items.get(item_id)
        item_standards = standards.get(item_id)
        if item is None or item_standards is None or len(item_standards) < item.turns:
            continue
        for turn in range(1, min(item.turns, len(replies)) + 1):
            body, name = judge_body(setup, item, turn, item_standards, replies)
            judgment = Judgment(item, turn, run_id, body, name, 0, None)
            retries = 0
            while (done := logged.get(judgment.hash_at(retries))) is not None and done.ok:
                retries += 1
            pending: ChatRequest | None = None
            if retries == 0:
                pending = ChatRequest(request_id(item_id, turn), body, judgment.hash_at(0))
            elif retry_invalid:
                latest = logged[judgment.hash_at(retries - 1)]
                if not verdict(setup, judgment, latest.raw_response, item_standards)["valid"]:
                    pending = ChatRequest(request_id(item_id, turn), body, judgment.hash_at(retries))
            planned.append(Judgment(item, turn, run_id, body, name, retries, pending))
    return planned


def judgment_rows(
    setup: JudgeSetup,
    model_key: str,
    planned: list[Judgment],
    standards: dict[str, list[Standard]],
    logged: dict[str, ChatResult],
) -> list[dict[str, Any]]:
    """One row per planned sub-item: its latest final judgment (a retry's, if any), or the error of its
    request. `planned` is read again after sending: the retry counts are the log's."""
    rows = []
    for judgment in planned:
        item = judgment.item
        row: dict[str, Any] = {
            "judge_key": setup.judge.key,
            "model_key": model_key,
            "edition": item.edition,
            "item_id": item.item_id,
            "area": item.area,
            "turn": judgment.turn,
            "max_points": item.turn_points[judgment.turn - 1],
            "prompt_name": judgment.prompt_name,
            "structured": setup.structured,
            "answer_run_id": judgment.answer_run_id,
            "max_completion_tokens": setup.ceiling,
            "source": LIVE_SOURCE,
        }
        latest_hash = judgment.hash_at(max(judgment.retries - 1, 0))
        result = logged.get(latest_hash)
        row["request_hash"] = latest_hash
        if result is None or not result.ok:
            row |= {
                "valid": False,
                "invalid_reason": "no judgment",
                "error": result.error if result is not None else "no reply yet (stopped before it)",
            }
        else:
            row |= verdict(setup, judgment, result.raw_response, standards[item.item_id])
            row |= {
                "judgment": result.raw_response,
                "finish_reason": result.provenance.finish_reason,
                "prompt_tokens": result.prompt_tokens,
                "completion_tokens": result.completion_tokens,
                "cost_usd": _paid(result),
                "judged_at": result.finished_at,
                "batch_id": result.batch_id,
            }
        rows.append(row)
    return rows

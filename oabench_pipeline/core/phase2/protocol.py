"""OAB-Bench's protocol for the 2nd phase, exactly as its scripts build it (no I/O, no Dagster).

Answering (OAB-Bench's `gen_api_answer.py`): one conversation per item, the item's `system` message, then
the user message `statement + "\n" + turns[0]`, the model's reply, then `turns[1]` as the next user
message. The piece has one turn; a question two (sub-items A and B), so sub-item B's request carries
sub-item A's reply and can only be built once that reply is kept.

Judging (its `gen_judgment.py`/`common.run_judge_single`): `single-oab-v1` for the piece and sub-item A,
`single-oab-v1-multi-turn` (the whole conversation) for sub-item B, each template filled by `str.format`
with the question (the statement prefixed to the first turn, as for answering), the examiners' answer
standard per turn (`ref_answer_1`, `ref_answer_2`), the answers, and the sub-item's points (`value`,
`value_half`). The user prompts OAB-Bench recorded with its o3 judgments are reproduced byte for byte.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from oabench_pipeline.core.prompts import canonical_json

# OAB-Bench asks with temperature 0.7: its categories (`39_direito_civil`, ...) are not in its temperature
# table, whose default is 0.7. The answers it published were sampled that way.
ANSWER_TEMPERATURE = 0.7
# Its completion ceiling is `--max-tokens`, 1024 by default: far too little for a 5-point procedural
# piece. Here the ceiling is the user's (`--max-completion-tokens`), none by default, and recorded.
SINGLE_TURN_PROMPT = "single-oab-v1"
MULTI_TURN_PROMPT = "single-oab-v1-multi-turn"
# OAB-Bench's judge settings: o1/o3 judges accept temperature 1 only and think within a large ceiling;
# other judges are asked at temperature 0 within 2048 tokens.
REASONING_JUDGE_PREFIXES = ("o1", "o3", "o4")
REASONING_JUDGE_CEILING = 20_000
JUDGE_CEILING = 2048


@dataclass(frozen=True)
class Phase2Item:
    """One item as `phase2_items` holds it: the piece (one turn) or a question (sub-items A and B)."""

    item_id: str
    edition: int
    area: str
    kind: str
    statement: str
    system: str
    turn_prompts: tuple[str, ...]
    turn_points: tuple[float, ...]

    @property
    def turns(self) -> int:
        return len(self.turn_prompts)


@dataclass(frozen=True)
class JudgeTemplate:
    """One of OAB-Bench's judge prompts (`data/judge_prompts.jsonl`): its name, system prompt, template."""

    name: str
    system_prompt: str
    prompt_template: str


def first_user_message(item: Phase2Item) -> str:
    """The first user message: the case, a newline, then the first sub-item's prompt."""
    return item.statement + "\n" + item.turn_prompts[0]


def user_messages(item: Phase2Item) -> list[str]:
    """The user message of each turn of the conversation."""
    return [first_user_message(item), *item.turn_prompts[1:]]


def answer_messages(item: Phase2Item, turn: int, earlier_replies: list[str]) -> list[dict[str, str]]:
    """The conversation that asks turn `turn` (1-based): system, then each earlier turn and its reply."""
    if not 1 <= turn <= item.turns:
        raise ValueError(f"{item.item_id} has {item.turns} turn(s), not turn {turn}")
    if len(earlier_replies) != turn - 1:
        raise ValueError(f"turn {turn} of {item.item_id} needs the {turn - 1} earlier reply(ies)")
    messages = [{"role": "system", "content": item.system}]
    for user, reply in zip(user_messages(item), earlier_replies, strict=False):
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
    messages.append({"role": "user", "content": user_messages(item)[turn - 1]})
    return messages


def request_body(
    model_id: str,
    messages: list[dict[str, str]],
    temperature: float,
    max_completion_tokens: int | None = None,
    reasoning_effort: str | None = None,
    web_search: bool = False,
) -> dict[str, Any]:
    """The JSON body of one 2nd-phase request (an answer or a judgment).

    The ceiling travels as `max_tokens`, the name OpenRouter and local servers read; absent when none
    is set. `reasoning` and `plugins` as in the 1st phase (`core/prompts.build_request_body`).
    """
    body: dict[str, Any] = {"model": model_id, "messages": messages, "temperature": temperature}
    if max_completion_tokens is not None:
        body["max_tokens"] = max_completion_tokens
    if reasoning_effort is not None:
        body["reasoning"] = {"effort": reasoning_effort}
    if web_search:
        body["plugins"] = [{"id": "web"}]
    return body


def phase2_request_hash(body: dict[str, Any], retry: int = 0) -> str:
    """SHA-256 of the body's canonical JSON; a retry of an invalid judgment (`--retry-invalid`) hashes its
    index with it, so the earlier judgment stays in the log under its own hash and is never overwritten."""
    payload: dict[str, Any] = body if retry == 0 else {"oabench_retry": retry, "body": body}
    return hashlib.sha256(canonical_json(payload).encode("utf-8", "surrogatepass")).hexdigest()


def judge_prompt_name(turn: int) -> str:
    """OAB-Bench's prompt for a sub-item: the single-turn one for the piece and A, the multi-turn for B."""
    return SINGLE_TURN_PROMPT if turn == 1 else MULTI_TURN_PROMPT


def judge_user_prompt(
    template: JudgeTemplate, item: Phase2Item, standards: list[str], answers: list[str], turn: int
) -> str:
    """The judge's user prompt for turn `turn`, filled as OAB-Bench fills it.

    `standards`: the answer standard of each turn (the published text, the distribution table in it);
    `answers`: the model's reply to each turn up to `turn`. The points are formatted as Python formats a
    float (`0.65`, `5.0`), as OAB-Bench's `str.format` did.
    """
    points = item.turn_points[turn - 1]
    fields: dict[str, Any] = {"value": points, "value_half": points / 2, "ref_answer_1": standards[0]}
    if turn == 1:
        fields |= {"question": first_user_message(item), "answer": answers[0]}
    else:
        fields |= {
            "question_1": first_user_message(item),
            "question_2": item.turn_prompts[1],
            "answer_1": answers[0],
            "answer_2": answers[1],
            "ref_answer_2": standards[1],
        }
    return template.prompt_template.format(**fields)


def judge_messages(system_prompt: str, user_prompt: str) -> list[dict[str, str]]:
    """System then user, as OAB-Bench's `chatgpt` conversation template sends them (it renames the system
    message `developer` for o1/o3 only because OpenAI's own API wanted it; a `system` message is what every
    OpenAI-compatible endpoint accepts, and OpenAI maps it to `developer` for those models itself)."""
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": user_prompt}]


def is_reasoning_judge(model_id: str) -> bool:
    return model_id.rsplit("/", 1)[-1].startswith(REASONING_JUDGE_PREFIXES)


def judge_temperature(model_id: str) -> float:
    """OAB-Bench's: 1 for an o1/o3 judge (the only value those accept), 0 for any other."""
    return 1.0 if is_reasoning_judge(model_id) else 0.0


def default_judge_ceiling(model_id: str) -> int:
    """OAB-Bench's completion ceiling of a judgment: 20,000 tokens for a reasoning judge, else 2,048."""
    return REASONING_JUDGE_CEILING if is_reasoning_judge(model_id) else JUDGE_CEILING

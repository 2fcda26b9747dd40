"""OAB-Bench's judge prompts (`data/judge_prompts.jsonl`, FastChat's format), parsed.

`single-oab-v1` grades the piece and sub-item A; `single-oab-v1-multi-turn`, with the whole conversation,
grades sub-item B. The file also carries FastChat's general prompts (pairwise, math), kept as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from oabench_pipeline.core.phase2.items import Phase2DataError, jsonl_records

SINGLE_TURN_PROMPT = "single-oab-v1"
MULTI_TURN_PROMPT = "single-oab-v1-multi-turn"
REQUIRED_PROMPTS = (SINGLE_TURN_PROMPT, MULTI_TURN_PROMPT)
_TEXT_FIELDS = ("name", "type", "system_prompt", "prompt_template", "output_format")


@dataclass(frozen=True)
class JudgePrompt:
    name: str
    type: str
    system_prompt: str
    prompt_template: str
    output_format: str
    description: str | None
    category: str | None


def parse_judge_prompts(text: str, what: str = "judge_prompts.jsonl") -> list[JudgePrompt]:
    """Every prompt of the file; the two OAB prompts must be there."""
    prompts: dict[str, JudgePrompt] = {}
    for number, record in jsonl_records(text, what):
        where = f"{what} line {number}"
        for name in _TEXT_FIELDS:
            if not isinstance(record.get(name), str) or not record[name]:
                raise Phase2DataError(f"{where}: field '{name}' missing or not text")
        if record["name"] in prompts:
            raise Phase2DataError(f"{where}: prompt {record['name']!r} listed twice")
        prompts[record["name"]] = JudgePrompt(
            name=record["name"],
            type=record["type"],
            system_prompt=record["system_prompt"],
            prompt_template=record["prompt_template"],
            output_format=record["output_format"],
            description=record.get("description"),
            category=record.get("category"),
        )
    missing = [name for name in REQUIRED_PROMPTS if name not in prompts]
    if missing:
        raise Phase2DataError(f"{what}: no prompt named {missing[0]!r}")
    return list(prompts.values())

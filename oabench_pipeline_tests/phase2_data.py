"""OAB-Bench's 2nd-phase files as the tests read them (from `../shared/oab/mirror`, never copied here)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oabench_pipeline.core.phase2.protocol import JudgeTemplate, Phase2Item

ANSWERING_MODELS = ("o3-2025-04-16", "sabia-3.1-2025-05-08")


def oab_bench_data(shared_oab: Path) -> Path:
    """The `data` folder of the pinned OAB-Bench commit in the mirror."""
    manifest = json.loads((shared_oab / "phase2-manifest.json").read_text(encoding="utf-8"))
    return shared_oab / "mirror" / "maritaca-ai" / "oab-bench" / manifest["commit"] / "data"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def items(data: Path) -> dict[str, Phase2Item]:
    found = {}
    for q in _lines(data / "oab_bench" / "question.jsonl"):
        edition, _, rest = q["category"].partition("_")
        found[q["question_id"]] = Phase2Item(
            item_id=q["question_id"],
            edition=int(edition),
            area=rest,
            kind="piece" if "peca" in q["question_id"] else "question",
            statement=q["statement"],
            system=q["system"],
            turn_prompts=tuple(q["turns"]),
            turn_points=tuple(float(v) for v in q["values"]),
        )
    return found


def standards(data: Path) -> dict[str, list[str]]:
    """item id → the answer standard of each turn (OAB-Bench's `guidelines` answers)."""
    return {
        g["question_id"]: list(g["choices"][0]["turns"])
        for g in _lines(data / "oab_bench" / "reference_answer" / "guidelines.jsonl")
    }


def templates(data: Path) -> dict[str, JudgeTemplate]:
    return {
        p["name"]: JudgeTemplate(p["name"], p["system_prompt"], p["prompt_template"])
        for p in _lines(data / "judge_prompts.jsonl")
    }


def answers(data: Path, model: str) -> dict[str, list[str]]:
    return {
        a["question_id"]: list(a["choices"][0]["turns"])
        for a in _lines(data / "oab_bench" / "model_answer" / f"{model}.jsonl")
    }


@dataclass(frozen=True)
class RecordedJudgment:
    item_id: str
    model: str
    prompt_name: str
    turn: int
    user_prompt: str
    judgment: str
    score: float


def judgments(data: Path) -> list[RecordedJudgment]:
    return [
        RecordedJudgment(
            j["question_id"],
            j["model"],
            j["judge"][1],
            int(j["turn"]),
            j["user_prompt"],
            j["judgment"],
            float(j["score"]),
        )
        for j in _lines(data / "oab_bench" / "model_judgment" / "o3-2025-04-16_single.jsonl")
    ]

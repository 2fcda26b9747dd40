"""Wiring for tests that replay the published OABench responses through the real pipeline."""

from __future__ import annotations

import json
from pathlib import Path

from oabench_pipeline.core.prompts import user_prompt
from oabench_pipeline.warehouse import Warehouse
from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file
from oabench_pipeline_tests.servers.openai_replay import RecordedReply, load_published_replies

TEST_KEY_ENV = "OABENCH_TEST_API_KEY"
TEST_KEY = "sk-or-v1-test-7f3a9c1e5b2d4f6a8c0e"

REPLAYED = {
    "deepseek/deepseek-v3.2": "2026-03-03T16-55-22-893Z_deepseek--deepseek-v3.2_direto",
    "x-ai/grok-4.1-fast": "2026-03-03T18-05-25-435Z_x-ai--grok-4.1-fast_direto",
    "anthropic/claude-haiku-4.5": "2026-03-03T18-01-17-579Z_anthropic--claude-haiku-4.5_direto",
}


def question_texts(warehouse: Warehouse) -> dict[str, str]:
    """qid → the exact user message the pipeline sends, built from our own parsed questions."""
    questions = warehouse.read("questions")
    return {
        q["qid"]: user_prompt(
            q["number"], q["stem"], q["choice_a"], q["choice_b"], q["choice_c"], q["choice_d"]
        )
        for q in questions.iter_rows(named=True)
    }


def published_replies(shared_oab: Path, warehouse: Warehouse) -> dict[tuple[str, str], RecordedReply]:
    return load_published_replies(shared_oab / "published-runs", question_texts(warehouse))


def use_replay_models(env: PipelineEnv, base_url: str, models: list[str], **extra: object) -> Path:
    """Point a private models registry at the replay server, with the test key in the environment."""
    env.set(TEST_KEY_ENV, TEST_KEY)
    entries = [{"id": m, "base_url": base_url, "api_key_env": TEST_KEY_ENV, **extra} for m in models]
    path = write_models_file(env.root / "models.toml", entries)
    env.set("OABENCH_MODELS_FILE", path)
    return path


def published_summary(shared_oab: Path, model: str) -> dict:
    return json.loads(
        (shared_oab / "published-runs" / REPLAYED[model] / "summary.json").read_text(encoding="utf-8")
    )

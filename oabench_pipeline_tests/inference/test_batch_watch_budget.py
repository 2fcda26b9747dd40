"""`oabench run --batch` of a key registered from the model catalogue, held to the watch policy: the batch's
worst case (every line's prompt plus the completion ceiling, at the batch price) is reserved against the
policy's budgets before anything is sent, refused in one line when it does not fit, held while the batch is
open (a SIGKILL after submission included), and settled to what the batch billed once it is collected."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from oabench_pipeline.core.tables import conform
from oabench_pipeline.core.watch_policy import RESERVED_COMPLETION_TOKENS
from oabench_pipeline.inference.batches.cells import journal_path
from oabench_pipeline.inference.spend import batch_holds
from oabench_pipeline_tests.inference.batch_helpers import killed_once_submitted
from oabench_pipeline_tests.inference.replay import TEST_KEY, TEST_KEY_ENV, published_replies
from oabench_pipeline_tests.inference.test_run_batch import batch_reply
from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file
from oabench_pipeline_tests.servers.batch_api import BatchPlan, OpenRouterBatchServer
from oabench_pipeline_tests.servers.openai_replay import ReplayServer

MODEL = "deepseek/deepseek-v3.2"
AUTO_KEY = "ds-auto"
PROMPT_USD_PER_MTOK, COMPLETION_USD_PER_MTOK = 0.25, 0.5
# A line's worst case at the batch price is at least its completion ceiling's: 80 lines of edition 45 hold
# at least 80 × 16,384 × $0.5/Mtok × 0.5 ≈ $0.33.
LINES_45 = 80
CEILING_FLOOR_USD = LINES_45 * RESERVED_COMPLETION_TOKENS * COMPLETION_USD_PER_MTOK / 1e6 * 0.5

RUN_45 = ("run", "--batch", "--models", AUTO_KEY, "--editions", "45")
POLICY = """\
[watch]
include = ["deepseek/"]
created_after = 2026-01-01
suite = "oabench-2026"
max_run_cost_usd = {ceiling}
monthly_budget_usd = {monthly}
api_key_env = "{key_env}"
"""


@contextmanager
def catalogue_key(
    env: PipelineEnv, shared_oab: Path, monthly: float, **batch_options: Any
) -> Iterator[tuple[ReplayServer, OpenRouterBatchServer]]:
    """AUTO_KEY registered from the model catalogue (the file the catalogue sensor writes) on a loopback
    OpenRouter-shaped batch API, its price listed in `model_catalogue`, under a policy of `monthly` USD a
    month and per model; a chat server on the same replies sees whether any chat completion is sent."""
    replies = {
        key: dataclasses.replace(reply, cost=0.0001 * (1 + len(key[1]) % 7))
        for key, reply in published_replies(shared_oab, env.warehouse).items()
    }
    with (
        ReplayServer(replies=replies, api_key=TEST_KEY) as chat,
        OpenRouterBatchServer(reply=batch_reply(replies), **batch_options) as batch,
    ):
        env.set(TEST_KEY_ENV, TEST_KEY)
        env.set("OABENCH_BATCH_POLL_S", "0.1")
        baseline = [{"id": "baseline/random", "kind": "baseline"}]
        env.set("OABENCH_MODELS_FILE", write_models_file(env.root / "models.toml", baseline))
        auto = {"id": MODEL, "key": AUTO_KEY, "api_key_env": TEST_KEY_ENV, "batch_api": "openrouter"}
        write_models_file(env.settings.catalogue_models_file, [{**auto, "base_url": batch.base_url}])
        # The chat server stands in for the same key's chat endpoint: `--batch` must never reach it.
        assert chat.base_url != batch.base_url
        policy = POLICY.format(ceiling=monthly, monthly=monthly, key_env=TEST_KEY_ENV)
        (env.root / "watch.toml").write_text(policy, encoding="utf-8")
        env.set("OABENCH_WATCH_FILE", env.root / "watch.toml")
        listing = pl.DataFrame(
            [
                {
                    "model": MODEL,
                    "prompt_usd_per_mtok": PROMPT_USD_PER_MTOK,
                    "completion_usd_per_mtok": COMPLETION_USD_PER_MTOK,
                }
            ]
        ).with_columns(fetched_at=pl.lit(dt.datetime.now(dt.UTC)), catalogue_url=pl.lit("http://catalogue"))
        today = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
        env.warehouse.write_partition("model_catalogue", conform("model_catalogue", listing), today)
        yield chat, batch


def billed_usd(env: PipelineEnv) -> float:
    rows = env.warehouse.read("inferences").filter((pl.col("model_key") == AUTO_KEY) & ~pl.col("skipped"))
    return float(rows["cost_usd"].sum())


def month_spent(env: PipelineEnv) -> str:
    return next(line for line in env.cli("status").output.splitlines() if "catalogue watch: $" in line)


def responses_root(env: PipelineEnv) -> Path:
    return env.settings.warehouse_path.parent / "responses"


@pytest.mark.slow  # a whole batch run through the CLI: ~30 s under load
def test_a_batch_that_fits_the_policy_runs_and_its_spend_is_what_it_billed(
    fresh_env: PipelineEnv, shared_oab: Path
) -> None:
    with catalogue_key(fresh_env, shared_oab, monthly=5.0) as (chat, batch):
        result = fresh_env.cli(*RUN_45)
        assert result.exit_code == 0, result.output
        assert chat.stats.total_requests == 0 and batch.requests["create"] == 1
        assert set(batch.billed_by_body.values()) == {1} and len(batch.billed_by_body) == LINES_45
        billed = billed_usd(fresh_env)
        assert billed > 0
        assert batch_holds(responses_root(fresh_env)) == {}  # collected: nothing held any more
        assert f"catalogue watch: ${billed:.4f} spent" in month_spent(fresh_env)
        print(f"edition 45 batched: billed ${billed:.6f}; held before sending ≥ ${CEILING_FLOOR_USD:.4f}")


@pytest.mark.slow
def test_a_batch_past_the_policy_is_refused_in_one_line_and_nothing_is_sent(
    fresh_env: PipelineEnv, shared_oab: Path
) -> None:
    monthly = CEILING_FLOOR_USD / 2  # below the batch's worst case
    with catalogue_key(fresh_env, shared_oab, monthly=monthly) as (chat, batch):
        result = fresh_env.cli(*RUN_45)
        assert result.exit_code == 1, result.output
        refusals = [line for line in result.output.splitlines() if "no batch sent" in line]
        assert refusals and all("a batch of 80 line(s) may cost up to" in line for line in refusals)
        assert "past the watch policy's max_run_cost_usd" in refusals[0]
        assert batch.requests["create"] == 0 and not batch.batches and chat.stats.total_requests == 0
        assert not journal_path(fresh_env.settings.warehouse_path.parent, AUTO_KEY, "45").exists()
        assert batch_holds(responses_root(fresh_env)) == {}
        assert "catalogue watch: $0.0000 spent" in month_spent(fresh_env)
        print(refusals[0])


@pytest.mark.slow
def test_a_sigkill_after_submission_keeps_the_worst_case_held_until_the_batch_is_collected(
    fresh_env: PipelineEnv, shared_oab: Path
) -> None:
    with catalogue_key(fresh_env, shared_oab, monthly=5.0, default_plan=BatchPlan(polls_to_finish=3)) as (
        chat,
        batch,
    ):
        journal = journal_path(fresh_env.settings.warehouse_path.parent, AUTO_KEY, "45")
        killed_once_submitted(list(RUN_45), journal)
        [held] = batch_holds(responses_root(fresh_env)).values()  # the killed round's batch is still open
        assert held >= CEILING_FLOOR_USD and batch.requests["create"] == 1

        rerun = fresh_env.cli(*RUN_45)
        assert rerun.exit_code == 0, rerun.output
        assert batch.requests["create"] == 1 and chat.stats.total_requests == 0
        assert batch_holds(responses_root(fresh_env)) == {}
        billed = billed_usd(fresh_env)
        assert f"catalogue watch: ${billed:.4f} spent" in month_spent(fresh_env)
        print(f"held ${held:.4f} across the SIGKILL; settled to the ${billed:.6f} billed")

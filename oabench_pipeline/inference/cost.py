"""Cost estimates before calling: prompt tokens (estimated from text) × the latest listed price."""

from __future__ import annotations

import math
from collections.abc import Sequence

from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.core.runs import with_logical_run_ids
from oabench_pipeline.inference.catalogue_store import Price
from oabench_pipeline.inference.cell import cell_name
from oabench_pipeline.inference.types import ChatRequest, ChatResult
from oabench_pipeline.warehouse import Warehouse

# What takes a price snapshot by hand (the `daily_model_catalogue` schedule does it every day): the
# catalogue's listing, then each registry model's price from it. Hints name it in full.
PRICING_COMMAND = "dg launch --assets model_catalogue,model_pricing"
PRICING_HINT = f"`{PRICING_COMMAND}` (from the repository root) takes one"

# What a cost no price snapshot tells reads as, wherever it is printed: never $0.
UNKNOWN_PRICE = "unknown (no price snapshot)"

CHARS_PER_TOKEN = 3.5  # conservative for Portuguese legal text: over-estimates tokens, so cost


def estimated_prompt_tokens(request_bodies: list[dict]) -> int:
    chars = sum(len(m["content"]) for body in request_bodies for m in body["messages"])
    return math.ceil(chars / CHARS_PER_TOKEN)


def listed_prompt_price(store: Warehouse, model: ModelConfig) -> float | None:
    """The newest price per prompt token of the model: a `model_pricing` snapshot's, or the snapshot an
    imported published run carries in its summary (`published_run_summaries`), whichever was taken last.
    None: neither lists the model."""
    sources = [
        ("model_pricing", "fetched_at"),
        ("published_run_summaries", "pricing_fetched_at"),
    ]
    selects = [
        f"select prompt_price_per_token as price, {taken} as taken from {table} "
        "where model = ? and prompt_price_per_token is not null"
        for table, taken in sources
        if store.has_table(table)
    ]
    if not selects:
        return None
    found = store.query(
        " union all ".join(selects) + " order by taken desc nulls last limit 1",
        [model.id] * len(selects),
        tables=[table for table, _ in sources if store.has_table(table)],
    )
    return None if found.is_empty() else found["price"].item()


def listed_price(store: Warehouse, model: ModelConfig) -> Price | None:
    """The newest snapshot's prices per prompt and completion token, if a pricing snapshot lists the model."""
    if not store.has_table("model_pricing"):
        return None
    found = store.query(
        "select prompt_price_per_token, completion_price_per_token from model_pricing where model = ? "
        "order by fetched_at desc limit 1",
        [model.id],
        tables=["model_pricing"],
    )
    return None if found.is_empty() else Price(*found.row(0))


def estimated_prompt_cost(
    store: Warehouse, model: ModelConfig, requests: Sequence[ChatRequest]
) -> float | None:
    """What sending `requests` would cost in prompt tokens at the newest listed price (None: no snapshot
    prices the model). The one estimate behind `oabench run --dry-run`, `oabench status` and `max_cost_usd`."""
    price = listed_prompt_price(store, model)
    return None if price is None else cost_at(requests, price)


def cost_at(requests: Sequence[ChatRequest], prompt_price: float, request_price: float = 0.0) -> float:
    """The estimate at given prices (USD per prompt token, per request): the watch policy's ceiling uses
    the catalogue's prices this way (`catalogue/watch.py`), `--dry-run` the price snapshot's."""
    return estimated_prompt_tokens([r.body for r in requests]) * prompt_price + len(requests) * request_price


def cell_estimate(
    store: Warehouse, model: ModelConfig, edition: str, replicates: int = 1, retry_invalid: bool = False
) -> tuple[int, float | None]:
    """(requests a run of the cell would send now, their estimated prompt cost; None: no snapshot prices
    the model) with `replicates` complete runs wanted: what `oabench run --dry-run` prints per cell, and
    what a suite costs a model is the sum over its editions. An offline baseline sends nothing."""
    from oabench_pipeline.inference.freshness import (
        planned_replicates,  # freshness reads the warehouse and logs
    )

    if model.kind == "baseline":
        return 0, 0.0
    questions = store.read("questions", edition)
    existing = with_logical_run_ids(store.read("inferences", cell_name(model.key, edition)), model.key)
    plans = planned_replicates(store, model, edition, questions, existing, replicates, retry_invalid)
    pending = [request for plan in plans for request in plan.pending]
    return len(pending), estimated_prompt_cost(store, model, pending) if pending else 0.0


def answer_cost(result: ChatResult, price: Price | None) -> tuple[float, bool]:
    """(USD, reported): the endpoint's cost, else reported tokens × the price listed when the reply arrived,
    else 0."""
    reported = result.total_cost_usd if result.total_cost_usd is not None else result.cost_usd
    if reported is not None:
        return reported, True
    price = price.at(result.finished_at) if price is not None else None
    if price is None or price.prompt is None or result.prompt_tokens is None:
        return 0.0, False
    return result.prompt_tokens * price.prompt + (result.completion_tokens or 0) * (
        price.completion or 0.0
    ), False

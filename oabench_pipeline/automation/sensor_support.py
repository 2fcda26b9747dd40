"""What the sensors need: which models can run unattended, which of their cells may run by themselves
(the `OABENCH_AUTORUN_MAX_COST_USD` opt-in and its budget), which editions are ingested.

A tick that raises is left to raise: Dagster records it as a failed tick, with its error, and keeps the
cursor, so the next tick tries again. A skip reason says only that there is nothing to do now."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dagster import (
    DagsterInstance,
    RunRequest,
)

from oabench_pipeline.automation.jobs import cell_requests
from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.inference.cost import cell_estimate
from oabench_pipeline.inference.credentials import credentials_problem
from oabench_pipeline.shared.resources import WarehouseResource
from oabench_pipeline.warehouse import Warehouse

AUTORUN_ENV = "OABENCH_AUTORUN_MAX_COST_USD"  # the opt-in (settings.py), named in what the sensors say


def runnable_model_keys(
    models: Iterable[ModelConfig], retired: Mapping[str, dt.date] | None = None
) -> tuple[list[str], list[str]]:
    """(keys that can run unattended, reasons for the others): baselines and API models with a key set,
    not retired in the model catalogue (`retired`: model id → its expiration date)."""
    runnable, held_back = [], []
    for model in models:
        problem = credentials_problem(model)
        if problem is None and model.kind == "api" and model.id in (retired or {}):
            problem = f"retired (expiration_date {(retired or {})[model.id]} in the model catalogue)"
        if problem is None:
            runnable.append(model.key)
        else:
            held_back.append(f"{model.key}: {problem}")
    return runnable, held_back


@dataclass(frozen=True)
class Autorun:
    """What a sensor may run by itself of one model's cells: `requests`; `held_back`: why the others are
    not run (one line naming the `oabench run` that runs them by hand; None: all run); `unpriced`: held
    back because no price snapshot lists the model, so its cost cannot be held to the budget."""

    requests: list[RunRequest] = field(default_factory=list)
    held_back: str | None = None
    unpriced: bool = False


def autorun_cells(
    store: Warehouse,
    model: ModelConfig,
    editions: Sequence[str],
    budget_usd: float | None,
    run_key_prefix: str,
    where: str,
    by_hand: str,
) -> Autorun:
    """The cell runs a sensor may request by itself for `model` (runnable unattended) on ingested `editions`.

    Nothing spends money by surprise: a baseline (offline, free) always runs; an API model only when its
    owner opted in (`budget_usd`: `OABENCH_AUTORUN_MAX_COST_USD`, None: off), a price snapshot lists it
    and its estimated prompt cost on `editions` (`oabench run --dry-run`'s) is within the budget. Its cells
    then carry the budget split between them by estimate as a ceiling on reported spend (`max_cost_usd`
    in each run's config), so together they never pass it. `where` names the editions and `by_hand` the
    command that runs them, in the reason given for a model held back."""
    if not editions:
        return Autorun()
    if model.kind == "baseline":
        return Autorun(cell_requests(editions, [model], run_key_prefix=run_key_prefix))
    if budget_usd is None:
        return Autorun(
            held_back=f"{model.key}: automatic runs of registry models are off ({AUTORUN_ENV} unset); "
            f"`{by_hand}` runs it on {where}"
        )
    estimates = {e: cell_estimate(store, model, e)[1] for e in editions}
    known = {e: cost for e, cost in estimates.items() if cost is not None}
    if len(known) < len(editions):
        return Autorun(
            held_back=f"{model.key}: no price snapshot lists {model.id}, so its cost cannot be held to "
            f"{AUTORUN_ENV}=${budget_usd}; waiting for one (a local server or a misspelt id never gets "
            f"one: `{by_hand}` runs it by hand)",
            unpriced=True,
        )
    total = sum(known.values())
    if total > budget_usd:
        return Autorun(
            held_back=f"{model.key}: estimated prompt cost ${total:.4f} on {where} is over "
            f"{AUTORUN_ENV}=${budget_usd}; `{by_hand} --dry-run` shows it"
        )
    requests: list[RunRequest] = []
    for edition in editions:  # the budget split by estimate: reported spend stops each cell at its share
        share = known[edition] * (budget_usd / total) if total > 0 else budget_usd / len(editions)
        requests += cell_requests([edition], [model], run_key_prefix=run_key_prefix, max_cost_usd=share)
    return Autorun(requests)


def ingested_editions(warehouse: WarehouseResource) -> set[str]:
    """Editions whose questions are in the warehouse: the `inferences` asset can run on them."""
    return set(warehouse.warehouse().partitions("questions"))


def missing_partitions(instance: DagsterInstance, partitions_name: str, keys: Iterable[str]) -> list[str]:
    existing = set(instance.get_dynamic_partitions(partitions_name))
    return sorted({k for k in keys if k not in existing})

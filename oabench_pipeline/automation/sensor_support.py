"""What the sensors need: which models can run unattended, which editions are ingested, and a tick
that never raises."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping

from dagster import (
    DagsterInstance,
    SensorEvaluationContext,
    SensorResult,
)

from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.inference.credentials import credentials_problem
from oabench_pipeline.resources import WarehouseResource


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


def ingested_editions(warehouse: WarehouseResource) -> set[str]:
    """Editions whose questions are in the warehouse: the `inferences` asset can run on them."""
    return set(warehouse.warehouse().partitions("questions"))


def missing_partitions(instance: DagsterInstance, partitions_name: str, keys: Iterable[str]) -> list[str]:
    existing = set(instance.get_dynamic_partitions(partitions_name))
    return sorted({k for k in keys if k not in existing})


def never_raise(
    sensor_name: str, context: SensorEvaluationContext, evaluate: Callable[[], SensorResult]
) -> SensorResult:
    """Run a tick; an unexpected error becomes a skip reason (the cursor stays, so the tick is retried)."""
    try:
        return evaluate()
    except Exception as error:  # a crashed tick shows no reason and stops nothing: report instead
        context.log.exception(f"{sensor_name}: tick failed")
        return SensorResult(
            skip_reason=f"{sensor_name} could not complete this tick: {type(error).__name__}: {error}",
            cursor=context.cursor,
        )

"""The instance `oabench` uses, and the runs it executes in its own process.

The CLI runs the very assets the UI shows, against the same instance (`DAGSTER_HOME`). Cells are launched
as runs of their own (`engine/launch.py`); everything else (models, ingest, the leaderboard tables, the site)
is an in-process run here (`run_assets`), which costs little more than Dagster's own bookkeeping. Both
read failures and interruptions the same way (`step_failure_messages`, `interruption`).
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from dagster import (
    AssetKey,
    AssetSelection,
    DagsterEvent,
    DagsterEventType,
    DagsterInstance,
    Definitions,
    ExecuteInProcessResult,
    JobDefinition,
    define_asset_job,
)

from oabench_pipeline.inference.interrupts import INTERRUPTED_METADATA
from oabench_pipeline.settings import Settings
from oabench_pipeline.shared import dagster_internals
from oabench_pipeline.shared.run_tags import HOST_TAG, PID_TAG
from oabench_pipeline.warehouse import views_refreshed_once

if TYPE_CHECKING:
    from dagster import AssetsDefinition, AssetSpec, SourceAsset


class InstanceHomeError(Exception):
    """DAGSTER_HOME cannot hold the instance (missing and not creatable, not writable, unreadable storage)."""


class InstanceUnavailableError(InstanceHomeError):
    """The instance's storage did not open (PostgreSQL down, an unreadable SQLite file): the folder is
    fine, so a read-only command can still report what the warehouse tells."""


def instance_home(settings: Settings) -> tuple[Path, str]:
    """The instance's folder, ready to open: `$DAGSTER_HOME`, or `<warehouse folder>/dagster_home` when
    unset; created with a `dagster.yaml` when new. Also (origin): how the folder was chosen, for messages.

    Raises `InstanceHomeError` (one line naming DAGSTER_HOME) when the folder cannot be used.
    """
    home = settings.dagster_home
    origin = "DAGSTER_HOME"
    if not home:
        home = str(settings.warehouse_path.parent / "dagster_home")
        origin = "DAGSTER_HOME (unset: defaults to <warehouse folder>/dagster_home)"
    home_path = Path(os.path.expanduser(home))
    if not home_path.is_absolute():
        raise InstanceHomeError(f"{origin} {home!r} must be an absolute path")
    _check_writable(home_path, origin)
    config = home_path / "dagster.yaml"
    if not config.exists():
        config.write_text(DEFAULT_INSTANCE_YAML, encoding="utf-8")
    return home_path, origin


def instance_for(settings: Settings) -> DagsterInstance:
    """The persistent instance: `$DAGSTER_HOME`, or `<warehouse folder>/dagster_home` when unset.

    The repository root's `dagster.yaml` points the `dagster`/`dg` command lines (run there with no
    DAGSTER_HOME) at that same `warehouse/dagster_home` storage, so every tool shares one instance;
    `oabench ui` starts the UI on it with DAGSTER_HOME set (`cli/ui.py`).
    Use it as a context manager: entering it makes its storages the current ones for Dagster.
    Raises `InstanceHomeError` (one line naming DAGSTER_HOME) when the folder cannot be used.
    """
    home_path, origin = instance_home(settings)
    os.environ["DAGSTER_HOME"] = str(home_path)
    try:
        with _retry_warnings_held():
            instance = DagsterInstance.get()
    except Exception as error:  # sqlite3, Dagster config errors: one line, not 110 of traceback
        reason = " ".join(str(error).split())[:300]
        raise InstanceUnavailableError(
            f"{origin} {home_path}: cannot open the Dagster instance ({type(error).__name__}: {reason})"
        ) from None
    return instance


@contextmanager
def _retry_warnings_held() -> Iterator[None]:
    """dagster-postgres warns on the root logger at each retry of a connection ("Retrying failed database
    connection: ..." and psycopg2's multi-line error): with PostgreSQL down that was 24 lines before the
    one-line error. Held while the instance opens; dropped, since either it opened or its error says why."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    # A handler of our own, so that `logging.warning` does not install one on stderr (`basicConfig`).
    root.handlers = [logging.NullHandler()]
    try:
        yield
    finally:
        root.handlers, root.level = handlers, level


def _check_writable(home: Path, origin: str) -> None:
    """Create the folder if needed and prove a file can be written there (permissions alone lie to root)."""
    try:
        home.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=home, prefix=".write-test-"):
            pass
    except OSError as error:
        raise InstanceHomeError(
            f"{origin} {home} is not a writable folder ({error.strerror or error}): "
            "set DAGSTER_HOME to a folder you can write"
        ) from None


def ensure_partitions(instance: DagsterInstance, partitions_name: str, keys: Sequence[str]) -> list[str]:
    """Register dynamic partition keys that are not known yet; returns the ones added."""
    missing = [k for k in keys if not instance.has_dynamic_partition(partitions_name, k)]
    if missing:
        instance.add_dynamic_partitions(partitions_name, missing)
    return missing


# The run limits of a new instance. They hold runs the run queue starts (UI backfills, sensors); `oabench run`
# launches its cells' runs itself, past the queue (docs/design/run-queue.md), so with `granularity: run` they
# claim no pool slot: the request limits (`concurrency`, `endpoint_concurrency`) bound every path.
DEFAULT_CONCURRENCY_YAML = """\
run_coordinator:               # the run queue, tagging each cell run with its endpoint (oabench/endpoint)
  module: oabench_pipeline.automation.run_coordinator
  class: EndpointTaggingRunCoordinator
  config:
    dequeue_use_threads: true    # start queued runs in parallel: a backfill's cells do not start one by one
    dequeue_num_workers: 4
concurrency:
  runs:
    max_concurrent_runs: 16      # runs in flight: cells, ingests and table rebuilds together
  pools:
    default_limit: 12            # pool `model_calls`: cells calling models at once (a process each)
    granularity: run             # queued until a slot is free, instead of started and then waiting
"""

# Run monitoring: the daemon (`oabench ui`, `dagster dev`) fails
# a run stuck STARTING or CANCELING, so a run whose process died never holds a slot of the run queue.
# `oabench run` and `oabench status` also close such runs themselves (`engine/stale_runs.py`): they run
# without a daemon, and know the run's process, where the daemon waits for a timeout.
DEFAULT_MONITORING_YAML = """\
run_monitoring:
  enabled: true
  start_timeout_seconds: 180     # STARTING this long (its process never came up): failed
  cancel_timeout_seconds: 60     # CANCELING this long (its process never ended it): canceled
  max_resume_run_attempts: 0     # the default run launcher cannot resume a run: a crashed one fails
  poll_interval_seconds: 30
  free_slots_after_run_end_seconds: 60   # pool slots a killed step still claims are given back
"""

# The instance settings, written once: `oabench` writes them into a new DAGSTER_HOME, and the repository's
# `dagster.yaml` ends with this very text after its storage paths (`test_instance_defaults.py` checks it).
INSTANCE_SETTINGS_YAML = (
    """\
telemetry:
  enabled: false
nux:                           # no "join the Dagster community" pop-up on the UI's first page
  enabled: false
"""
    + DEFAULT_CONCURRENCY_YAML
    + DEFAULT_MONITORING_YAML
)

DEFAULT_INSTANCE_YAML = (
    """\
# Written by `oabench` for a new DAGSTER_HOME: local SQLite storage (the default, in this folder), no
# telemetry, run limits for cells, run monitoring.
"""
    + INSTANCE_SETTINGS_YAML
)


@dataclass(frozen=True)
class RunOutcome:
    success: bool
    run_id: str
    errors: list[str]
    failed_checks: list[str]
    interrupted: bool = False
    """A signal stopped it (Ctrl-C): a cell to resume, not a failure."""


def run_assets(
    defs: Definitions,
    instance: DagsterInstance,
    selection: Sequence[str],
    partition_key: str | None = None,
    run_config: dict | None = None,
    tags: dict[str, str] | None = None,
) -> RunOutcome:
    """Materialize the selected assets (and their checks) of `defs` in one in-process run.

    Dagster's console logger is set to WARNING (unless `run_config` sets `loggers`): the CLI prints its
    own progress, and the full event log stays in the instance for the UI.
    """
    log_level = Settings.from_env().log_level
    run_config = {"loggers": {"console": {"config": {"log_level": log_level}}}, **(run_config or {})}
    with views_refreshed_once():
        result = _materialize(defs, instance, selection, partition_key, run_config, tags)
    return RunOutcome(
        result.success,
        result.run_id,
        failure_messages(result),
        failed_checks(result),
        interruption(result.all_events) is not None,
    )


def _materialize(
    defs: Definitions,
    instance: DagsterInstance,
    selection: Sequence[str],
    partition_key: str | None,
    run_config: dict,
    tags: dict[str, str] | None,
) -> ExecuteInProcessResult:
    job, subset = _selection_job(defs, tuple(selection))
    return job.execute_in_process(
        run_config=run_config,
        instance=instance,
        partition_key=partition_key,
        asset_selection=subset,
        raise_on_error=False,
        tags={PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname(), **(tags or {})},
    )


# The job of each selection, resolved once per `Definitions`: resolving one builds the repository of the
# whole asset graph and validates it, ~10% of the CPU of `oabench run` over 58 baseline cells were it done
# per run (A/B in the commit that added this cache), where each cell is a run of the same two assets. Keyed
# by the `Definitions` object (not weak-referenceable: the last few are kept, a process builds one or two).
_RECENT_DEFINITIONS = 4
SelectionJob = tuple[JobDefinition, list[AssetKey] | None]
_selection_jobs: OrderedDict[int, tuple[Definitions, dict[tuple[str, ...], SelectionJob]]] = OrderedDict()
_selection_jobs_lock = threading.Lock()


def _selection_job(defs: Definitions, selection: tuple[str, ...]) -> SelectionJob:
    with _selection_jobs_lock:
        # The entry holds `defs` itself, so its id cannot be reused by another object while it is kept.
        _, jobs = _selection_jobs.setdefault(id(defs), (defs, {}))
        _selection_jobs.move_to_end(id(defs))
        while len(_selection_jobs) > _RECENT_DEFINITIONS:
            _selection_jobs.popitem(last=False)
        if selection not in jobs:
            jobs[selection] = _resolve_selection_job(defs, selection)
        return jobs[selection]


def _resolve_selection_job(defs: Definitions, selection: tuple[str, ...]) -> SelectionJob:
    """The job of `defs` (`automation/jobs.py`) whose selection is exactly `selection`, else the smallest one
    holding it with the keys to run of it: the UI's Runs page then names what the run is (`oabench_cell`,
    `ingest_edition`, `rebuild_leaderboard`, ...). A selection no job holds (an ad-hoc one) runs as
    `dagster.materialize` would run it, in `__ephemeral_asset_job__`."""
    graph = defs.resolve_asset_graph()
    wanted = AssetSelection.assets(*selection).resolve(graph)
    holding = []
    for job in defs.jobs or []:
        job_selection = getattr(job, "selection", None)  # an asset job (`define_asset_job`)
        if isinstance(job_selection, AssetSelection):
            keys = job_selection.resolve(graph)
            if wanted <= keys:
                holding.append((len(keys), job.name, keys))
    if holding:
        _, name, keys = min(holding)
        return defs.resolve_job_def(name), None if keys == wanted else sorted(wanted)
    return _ephemeral_selection_job(defs, selection), None


def _ephemeral_selection_job(defs: Definitions, selection: tuple[str, ...]) -> JobDefinition:
    """What `dagster.materialize(defs.assets, selection=..., resources=defs.resources)` runs."""
    name = "__ephemeral_asset_job__"  # the name `materialize` gives its job
    job_defs = Definitions(
        jobs=[define_asset_job(name=name, selection=AssetSelection.assets(*selection))],
        # Our definitions hold no CacheableAssetsDefinition (the legacy kind `materialize` refuses).
        assets=cast("list[AssetsDefinition | AssetSpec | SourceAsset]", list(defs.assets or [])),
        resources=dict(defs.resources or {}),
    )
    job_defs.resolve_all_job_defs()  # validates the asset graph and resources, as `materialize` does
    return job_defs.resolve_job_def(name)


def failure_messages(result: ExecuteInProcessResult) -> list[str]:
    return step_failure_messages(result.all_events)


def step_failure_messages(events: Iterable[DagsterEvent]) -> list[str]:
    """One message per failed step: the user's `Failure` description, else the root exception's message
    (`oabench status` reads the same from the instance's event log)."""
    messages = []
    for event in events:
        if not event.is_step_failure:
            continue
        data = event.step_failure_data
        user = data.user_failure_data
        if user and user.description:
            messages.append(user.description)
            continue
        error = data.error
        if (
            error is None
        ):  # a `Failure` with no description: what its metadata says, else that it said nothing
            metadata = (user.metadata or {}) if user is not None else {}
            said = ", ".join(f"{k}: {getattr(v, 'value', v)}" for k, v in metadata.items())
            messages.append(f"{event.step_key}: failed ({said or 'no description or error recorded'})")
            continue
        while error.cause is not None:  # the user's exception, not Dagster's wrapper around it
            error = error.cause
        messages.append(f"{event.step_key}: {error.message.strip()}")
    return messages


NOT_LAUNCHED = "not launched: "
"""How the line of a run its code server did not start begins (`engine/launch.py`), in its event log."""


def run_failure_reason(events: Iterable[DagsterEvent]) -> str | None:
    """Why a run failed when no step says so, from its RUN_FAILURE and ENGINE_EVENT events: how its process
    ended (exit code or signal) when Dagster recorded it, or why it was not launched, else the run failure's
    own message (e.g. "its process (PID 123) died without ending the run"), else None."""
    failure: str | None = None
    crash: str | None = None
    for event in events:
        message = event.message or ""
        if event.event_type == DagsterEventType.RUN_FAILURE and message:
            failure = message
        elif event.event_type == DagsterEventType.ENGINE_EVENT:
            ended = dagster_internals.process_end(message)
            if ended is not None:
                crash = f"its process {ended}"
            elif message.startswith(NOT_LAUNCHED):
                crash = message
    if crash is not None and (failure is None or failure == dagster_internals.FAILED_FROM_OUTSIDE):
        return crash
    return failure


def one_line(messages: list[str], limit: int = 400) -> str:
    """Failure messages as one line: whitespace collapsed, `; `-joined, cut at `limit` characters."""
    text = "; ".join(" ".join(message.split()) for message in messages) or "failed, no reason recorded"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cell_failure_line(model_key: str, edition: str, messages: list[str]) -> str:
    """Why a cell's run failed, in one line, without the cell's name (the line it goes on names it):
    what `oabench run` prints in its last lines and `oabench status` shows in the cell's row."""
    named = (f"{model_key} × edition {edition}: ", f"{model_key} × {edition}: ")
    return one_line([next((m[len(n) :] for n in named if m.startswith(n)), m) for m in messages])


def interruption(events: Iterable[DagsterEvent]) -> str | None:
    """ "interrupted (SIGINT)" when a step failed because a signal stopped it
    (`interrupts.INTERRUPTED_METADATA`), else None."""
    for event in events:
        if event.is_step_failure:
            user = event.step_failure_data.user_failure_data
            value = (user.metadata or {}).get(INTERRUPTED_METADATA) if user is not None else None
            if value is not None:
                return str(getattr(value, "value", value))
    return None


def failed_checks(result: ExecuteInProcessResult) -> list[str]:
    """Asset checks that ran and failed without stopping the run (non-blocking ones, e.g. error rate)."""
    failed = []
    for event in result.all_events:
        if event.event_type_value != "ASSET_CHECK_EVALUATION":
            continue
        evaluation = event.asset_check_evaluation_data
        if not evaluation.passed:
            partition = f" [{evaluation.partition}]" if evaluation.partition else ""
            failed.append(f"{evaluation.asset_key.to_user_string()}.{evaluation.check_name}{partition}")
    return failed

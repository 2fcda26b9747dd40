"""Is a partition up to date? Data versions kept in the warehouse's files answer it without Dagster.

A partition computed from others records their data versions when it is written (`Warehouse.write_partition(
inputs=)`: the same SHA-256 of the rows each asset reports to Dagster, `core/versions.py`); it is up to date
while those inputs still have the versions it recorded. So a re-materialization that changes no row (a forced
re-parse of the same questions) stales nothing, here and in Dagster's automation alike, and a changed row
stales exactly what was computed from it. Files written without recorded inputs (by an older release) fall
back to file times: built after every input.

The one answer to "is this cell done": `oabench run` skips a cell when `inferences_are_current` and
`scores_are_current` hold (a response log with damaged lines is not current: the run sets them aside) and exits 0 only when they hold for every requested cell; `oabench status`
calls a cell `complete` only under the same two conditions (else `stale`, `failed` or `missing`, with
why). A partition whose file is unreadable (a damaged footer) is never up to date.

The CLI uses this to skip work that would change nothing (a no-op rerun then costs well under a
second per command instead of a run per cell); `--force` skips the check. The Dagster UI always
recomputes what it is asked to.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from oabench_pipeline.core.editions import Edition
from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.core.runs import replicate_of, with_logical_run_ids
from oabench_pipeline.core.scoring import SCORING_VERSION
from oabench_pipeline.core.tables import ANALYSIS_TABLES
from oabench_pipeline.core.versions import ANALYSIS_VERSION
from oabench_pipeline.exams.validation import registry_drift
from oabench_pipeline.inference.cell import (
    CellPlan,
    build_requests,
    cell_name,
    complete_imported_runs,
    replicate_plans,
)
from oabench_pipeline.inference.log_records import LogContents, inspect_log
from oabench_pipeline.inference.response_log import cell_log_path, latest_by_hash
from oabench_pipeline.shared.raw_store import RawStore
from oabench_pipeline.warehouse import UNPARTITIONED, Warehouse


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime_ns / 1e9
    except FileNotFoundError:
        return None


def _newer_or_equal(path: Path, *inputs: Path) -> bool:
    """`path` exists and was written after every existing input."""
    written = _mtime(path)
    if written is None:
        return False
    return all((t := _mtime(p)) is None or t <= written for p in inputs)


def _readable(warehouse: Warehouse, table: str, key: str) -> bool:
    """The partition file, if any, has an intact footer: an unreadable partition is never up to date."""
    return not warehouse.damaged_partitions(table, [key], thorough=False)


def edition_is_current(warehouse: Warehouse, store: RawStore, edition: Edition) -> bool:
    """The stored PDFs match the pins, both parsed tables were written from them since, and what those
    tables took from the registry (areas, annulments, exam date, key status) is still what it says."""
    key = edition.partition_key
    if not all(_readable(warehouse, t, key) for t in ("source_files", "answer_keys", "questions")):
        return False
    sources = warehouse.read("source_files", key)
    if sources.is_empty() or set(sources["sha256"]) != {edition.booklet.sha256, edition.answer_key.sha256}:
        return False
    if any(store.verified_path(f.sha256) is None for f in (edition.booklet, edition.answer_key)):
        return False
    source_file = warehouse.partition_path("source_files", key)
    answer_keys = warehouse.partition_path("answer_keys", key)
    written_in_order = _newer_or_equal(answer_keys, source_file) and not _changed_inputs(
        warehouse, "questions", key, {"answer_keys": key}
    )
    # The tables also carry the registry's facts (areas, annulments, dates): an edit there re-ingests.
    return written_in_order and not registry_drift(
        edition, warehouse.read("answer_keys", key), warehouse.read("questions", key)
    )


def summary_editions(warehouse: Warehouse, existing: pl.DataFrame) -> dict[str, list[int]]:
    """Imported run id → editions its published summary lists (none: an aborted run)."""
    if existing.is_empty():
        return {}
    if "imported" not in existing["source"].to_list():  # the common case, asked per cell: no filter
        return {}
    imported = existing["source"] == "imported"
    editions: dict[str, list[int]] = {}
    for run_id in existing["run_id"].filter(imported).drop_nulls().unique():
        summary = warehouse.read("published_run_summaries", run_id)
        if not summary.is_empty() and summary["has_summary"].item():
            editions[run_id] = summary["editions"].item().to_list()
    return editions


def inferences_are_current(
    warehouse: Warehouse, model: ModelConfig, edition: str, replicates: int = 1, retry_invalid: bool = False
) -> bool:
    """The cell has `replicates` complete runs, each answering exactly today's requests, and nothing is stale.
    `retry_invalid`: and no live run of it holds an invalid reply (`oabench run --retry-invalid`)."""
    partition = cell_name(model.key, edition)
    if not (_readable(warehouse, "inferences", partition) and _readable(warehouse, "questions", edition)):
        return False
    # Without the reasoning, which no check reads: for some models a megabyte a reply, held once more here
    # (and once more as the rows of `planned_replicates`) while the response log is read.
    existing = with_logical_run_ids(
        warehouse.read("inferences", partition).drop("reasoning", strict=False), model.key
    )
    if existing.is_empty():
        return False
    questions = edition_questions(warehouse, edition)
    if stale_reasons(warehouse, edition, partition, existing, model, questions):
        return False
    if model.kind == "baseline":
        return existing.filter(pl.col("error").is_not_null()).is_empty()
    if damaged_log_lines(warehouse, model.key, edition):
        return False  # a run of the cell sets them aside (and asks again what they lost)
    return not planned_replicates(warehouse, model, edition, questions, existing, replicates, retry_invalid)


def edition_questions(warehouse: Warehouse, edition: str) -> pl.DataFrame:
    """The edition's questions, read once per version of their file and shared by every model's cells (the
    same frame: `build_requests` remembers its requests per frame). Callers must not mutate it."""
    path = warehouse.partition_path("questions", edition)
    try:
        stat = path.stat()
    except FileNotFoundError:
        return pl.DataFrame()
    return _edition_questions(warehouse.db_path, edition, (stat.st_ino, stat.st_size, stat.st_mtime_ns))


@functools.lru_cache(maxsize=64)
def _edition_questions(db_path: Path, edition: str, identity: tuple[int, int, int]) -> pl.DataFrame:
    return Warehouse(db_path).read("questions", edition)


def damaged_log_lines(warehouse: Warehouse, model_key: str, edition: str) -> list[str]:
    """`file:line: why; ...` for each damaged line of the cell's response log (`log_records.py`)."""
    path = cell_log_path(warehouse.root / "responses", model_key, edition)
    return [line.describe(path) for line in log_contents(path, keep_results=False).damaged]


def log_contents(path: Path, keep_results: bool = True) -> LogContents:
    """The log's replies (with `keep_results`) and damaged lines, read once per version of the file and
    flag: `status` and a no-op `run` ask of each cell's log in turn. Only the newest log is remembered (a
    reasoning model's log can hold a megabyte per reply)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return LogContents([], [])
    return _log_contents(path, (stat.st_ino, stat.st_size, stat.st_mtime_ns), keep_results)


@functools.lru_cache(maxsize=2)
def _log_contents(path: Path, identity: tuple[int, int, int], keep_results: bool) -> LogContents:
    return inspect_log(path, keep_results=keep_results)


def planned_replicates(
    warehouse: Warehouse,
    model: ModelConfig,
    edition: str,
    questions: pl.DataFrame,
    existing: pl.DataFrame,
    replicates: int,
    retry_invalid: bool = False,
) -> list[CellPlan]:
    """The live replicates a run of the cell would resume or start now, given its response log and the
    imported runs that already completed the edition (what `oabench run`, its dry run and `oabench status`
    all mean by "still to send"); with `retry_invalid`, invalid replies are to send again too."""
    elsewhere = complete_imported_runs(existing, int(edition), summary_editions(warehouse, existing))
    # The partition's rows first: when they complete every replicate, no log can add to them (a reply in
    # the log only takes a request off `pending`), so the log's replies need not be read, the common case.
    if not replicate_plans(model, questions, {}, existing, replicates, elsewhere, retry_invalid):
        return []
    logged = latest_by_hash(
        log_contents(cell_log_path(warehouse.root / "responses", model.key, edition)).results
    )
    return replicate_plans(model, questions, logged, existing, replicates, elsewhere, retry_invalid)


def _partition_mtime(store: Warehouse, table: str, key: str) -> float | None:
    return _mtime(store.partition_path(table, key))


def _changed_inputs(store: Warehouse, table: str, key: str, inputs: dict[str, str]) -> list[str]:
    """The tables of `inputs` (table → partition key) whose data changed since partition `key` of `table`
    was computed from them: their data version differs from the one it recorded, or (a file written
    without recorded inputs) their file is newer. A missing input changed nothing the partition holds."""
    recorded = store.recorded_inputs(table, key)
    if recorded is None:
        built = _partition_mtime(store, table, key)
        return [
            name
            for name, input_key in inputs.items()
            if built is not None
            and (changed := _partition_mtime(store, name, input_key)) is not None
            and changed > built
        ]
    current = store.input_versions(inputs)
    return [name for name, version in current.items() if recorded.get(name) != version]


def stale_reasons(
    store: Warehouse,
    edition: str,
    cell_key: str,
    rows: pl.DataFrame,
    model: ModelConfig | None,
    questions: pl.DataFrame,
) -> list[str]:
    """Why a complete cell no longer reflects its inputs (empty: it does)."""
    reasons = [
        f"{table} changed since the cell was built"
        for table in _changed_inputs(store, "inferences", cell_key, {"questions": edition})
    ]
    if model is not None and model.kind != "baseline" and not rows.is_empty():
        # Python over the columns' values, not Series masks: asked of every cell by `status` and a no-op
        # `run` (`rows` carry logical run ids, as both callers read them).
        asked: dict[str, list[tuple[str, str]]] = {}
        names = ("run_id", "qid", "request_hash", "error", "raw_response", "source")
        for run_id, qid, hash_, error, raw_response, source in zip(
            *(rows[name].to_list() for name in names), strict=True
        ):
            if error is None and raw_response is not None and source == "live":
                asked.setdefault(run_id, []).append((qid, hash_))
        changed_hashes = 0
        for run_id, pairs in asked.items():
            replicate = replicate_of(run_id, model.key) or 1
            current = {r.qid: r.request_hash for r in build_requests(model, questions, replicate)}
            changed_hashes += sum(1 for q, h in pairs if current.get(q) != h)
        if changed_hashes:
            reasons.append(f"model config or prompts changed ({changed_hashes} request hash(es) differ)")
    return reasons


def scores_are_current(warehouse: Warehouse, model_key: str, edition: str) -> bool:
    partition = cell_name(model_key, edition)
    scores = warehouse.partition_path("scores", partition)
    if not _readable(warehouse, "scores", partition):
        return False
    if scores.is_file() and warehouse.written_version("scores", partition) != SCORING_VERSION:
        return False  # scored by an older scoring version
    # Scores written before runs existed have no run_id: the leaderboard cannot tell their run apart.
    if scores.is_file() and "run_id" not in pl.read_parquet_schema(scores):
        return False
    if not scores.is_file():
        return False
    inputs = {"inferences": partition, "questions": edition, "answer_keys": edition}
    return not _changed_inputs(warehouse, "scores", partition, inputs)


# Every table the analysis tables and the report read (`core/leaderboard.py`, `scoring/inputs.py`,
# `scoring/reports.py`): a write to any of them since the last rebuild may change what they show.
LEADERBOARD_INPUTS = (
    "scores",
    "inferences",
    "questions",
    "answer_keys",
    "published_run_summaries",
    "editions",
    "candidate_pass_rates",
    "models",
    "model_pricing",
    "model_catalogue",
)


def leaderboard_is_current(warehouse: Warehouse, registry_files: Sequence[Path] = ()) -> bool:
    """Every analysis table was rebuilt after every partition of the tables they read (`LEADERBOARD_INPUTS`:
    the cells' scores and answers, the models table, the price snapshot, ...) and the editions registry
    files (`registry_files`: its suites) were written, and the report after them (each table is its own
    asset: one may have been rebuilt alone). A partition written again with the same rows counts as
    changed; so does one removed or set aside (its table's folder changed: the folders are inputs too)."""
    if not all(_readable(warehouse, table, UNPARTITIONED) for table in ANALYSIS_TABLES):
        return False
    # Tables an older analysis computed (a release since bumped ANALYSIS_VERSION) are rebuilt once.
    if any(warehouse.written_version(table) != ANALYSIS_VERSION for table in ANALYSIS_TABLES):
        return False
    report = warehouse.root / "reports" / "leaderboard.html"
    tables = [warehouse.partition_path(table) for table in ANALYSIS_TABLES]
    folders = [warehouse.table_dir(table) for table in LEADERBOARD_INPUTS]
    inputs = [*folders, *(path for folder in folders for path in folder.glob("*.parquet")), *registry_files]
    # Each file's time read once: a warehouse of thousands of cells has thousands of inputs.
    written = [_mtime(table) for table in tables]
    changed = [t for path in inputs if (t := _mtime(path)) is not None]
    if any(t is None for t in written):
        return False
    oldest_table = min(t for t in written if t is not None)
    return (not changed or max(changed) <= oldest_table) and _newer_or_equal(report, *tables)


def models_table_is_current(warehouse: Warehouse, *registry_files: Path) -> bool:
    """The `models` table was written after the registry files (the catalogue's generated one too)."""
    return _newer_or_equal(warehouse.partition_path("models"), *registry_files)

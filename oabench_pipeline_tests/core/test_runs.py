"""Which run of a cell counts: completeness, replicate numbering, the canonical run and `as_of`."""

from __future__ import annotations

import datetime as dt

import polars as pl

from oabench_pipeline.core.runs import (
    RUN_CELL_SCHEMA,
    canonical_run_cells,
    end_of_day,
    live_run_id,
    replicate_of,
    runs_table,
    with_logical_run_ids,
    with_replicates,
)


def _at(day: int, hour: int) -> dt.datetime:
    return dt.datetime(2026, 3, day, hour, tzinfo=dt.UTC)


def _cells(rows: list[tuple[str, int, str, str, dt.datetime, dt.datetime | None]]) -> pl.DataFrame:
    frame = pl.DataFrame(
        [
            {
                "model_key": key,
                "edition": edition,
                "run_id": run_id,
                "source": source,
                "started_at": started,
                "completed_at": completed,
                "complete": completed is not None,
            }
            for key, edition, run_id, source, started, completed in rows
        ],
        schema={k: v for k, v in RUN_CELL_SCHEMA.items() if k != "replicate"},
    )
    return with_replicates(frame)


CELLS = _cells(
    [
        ("m", 43, "study", "imported", _at(3, 14), _at(3, 17)),
        ("m", 43, "rerun", "imported", _at(24, 9), _at(24, 10)),
        ("m", 43, "aborted", "imported", _at(25, 9), None),
        ("m", 44, "study", "imported", _at(3, 14), _at(3, 17)),
        ("n", 43, "partial", "imported", _at(3, 9), None),
    ]
)


def test_replicates_number_complete_runs_by_completion_time() -> None:
    replicate = {(r["edition"], r["run_id"]): r["replicate"] for r in CELLS.iter_rows(named=True)}
    assert replicate == {
        (43, "study"): 1,
        (43, "rerun"): 2,
        (43, "aborted"): None,
        (44, "study"): 1,
        (43, "partial"): None,
    }


def test_canonical_is_the_newest_complete_run_and_as_of_goes_back_in_time() -> None:
    newest = canonical_run_cells(CELLS)
    assert newest.select("model_key", "edition", "run_id", "complete").rows() == [
        ("m", 43, "rerun", True),  # never the later aborted run
        ("m", 44, "study", True),
        ("n", 43, "partial", False),  # no complete run: shown, never ranked
    ]
    study_day = canonical_run_cells(CELLS, dt.date(2026, 3, 3))
    assert study_day.filter(pl.col("model_key") == "m")["run_id"].to_list() == ["study", "study"]
    assert canonical_run_cells(CELLS, dt.date(2026, 3, 2)).is_empty()
    assert end_of_day(dt.date(2026, 3, 3)) == dt.datetime(2026, 3, 4, tzinfo=dt.UTC)


def test_runs_table_one_row_per_run() -> None:
    runs = runs_table(CELLS).sort("model_key", "run_id")
    assert runs.select("run_id", "complete", "replicate", "editions").rows() == [
        ("aborted", False, None, []),
        ("rerun", True, 2, [43]),
        ("study", True, 1, [43, 44]),
        ("partial", False, None, []),
    ]


def test_rows_from_before_runs_become_replicate_one_or_the_baseline_run() -> None:
    rows = pl.DataFrame(
        {
            "source": ["live", "live", "imported", "baseline"],
            "run_id": ["3f2a-dagster-uuid", live_run_id("k", 2), "folder", "another-uuid"],
        }
    )
    assert with_logical_run_ids(rows, "k")["run_id"].to_list() == [
        "live:k:r1",
        "live:k:r2",
        "folder",
        "baseline:k",
    ]
    assert (replicate_of("live:k:r12", "k"), replicate_of("live:k:rx", "k"), replicate_of("folder", "k")) == (
        12,
        None,
        None,
    )

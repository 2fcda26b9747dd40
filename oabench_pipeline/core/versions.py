"""Data versions: a SHA-256 of what a partition holds, so "did it change" is a comparison of two strings.

Dagster records the data version returned with each materialization; the automation conditions
(`scoring/conditions.py`) re-run a downstream asset only when an upstream version differs from the
one it had, and the UI marks an asset stale when an input's version moved since it was built. A version
must therefore change exactly when the content does: rows are hashed as canonical JSON lines, sorted
(a rebuild may list the same rows in another order), with the column names and types, and without the
columns that record *when* or *by which run* a row was written rather than what it says.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import polars as pl

# Code versions of the exam parsers (the `answer_keys` and `questions` assets): bump one with any change
# to what that parser extracts, so Dagster marks every edition's rows stale and a re-ingest re-scores the
# cells whose rows changed. Kept here rather than beside the parsers: their modules import pymupdf, which
# loading the definitions must not pay for (`exams/assets.py` imports them inside the steps).
ANSWER_KEY_PARSER_VERSION = "answer-key-3"  # 3: notices of a changed answer; key provenance columns
BOOKLET_PARSER_VERSION = "booklet-5"  # 5: the 38th's layout; bare numbers by band
# The 2nd phase's parsers (items, answer standards, judge prompts: `core/phase2/`), stored with their partitions.
PHASE2_PARSER_VERSION = "phase2-parser-1"

# The analysis tables' code version: bump it with any change to how a table is computed, so that the
# automation rebuilds them once (`scoring/conditions.py`) and so does the next `oabench run`, which
# reads the version each table was written with (`freshness.leaderboard_is_current`).
ANALYSIS_VERSION = "analysis-9"  # 2: Rasch tables; 3: per-edition costs; 4: suites (`_by_suite`, `suites`); 5: `retired`; 6: contamination_by_cutoff pooled row; 7: law currency (legal_reforms, question_law_currency, law_currency_effect, leaderboard_current_law); 8: leave-one-out difficulties finite where the other keys give no finite edition mean; 9: the key audit leaves the offline baselines out

# The report's code version (`leaderboard_report`, the site's pages): bump it with any change to what the
# report shows. Kept here so that the definitions read it without importing the report's builder.
REPORT_VERSION = "report-6"  # 4: costs and latencies with the terminal's digits; 5: answer keys' provenance; 6: candidates' pass rates

# The site's code version (`leaderboard_site`): bump it when the pages change, to have the site rebuilt.
SITE_VERSION = "site-4"  # 2: an Início per suite with a switcher; passed editions of the suite's editions; 3: law currency; key provenance on question pages; 4: 2nd-phase pages, candidates' pass rates

# Columns of `inferences` that say when or by which Dagster run a row was (re)written: a rebuild of an
# unchanged cell (a baseline recomputed, skipped rows re-dated, a rerun that sent nothing) changes them.
# `batch_id` says how an answer was delivered, not what it is: a cell answered by chat and by batch with the
# same replies has the same version.
INFERENCE_BOOKKEEPING_COLUMNS: tuple[str, ...] = ("created_at", "dagster_run_id", "batch_id")


def exclude_from_version(table: str) -> tuple[str, ...]:
    """The columns a table's data version leaves out (the bookkeeping of `inferences`, none elsewhere)."""
    return INFERENCE_BOOKKEEPING_COLUMNS if table == "inferences" else ()


def frame_version(frame: pl.DataFrame, exclude: Iterable[str] = ()) -> str:
    """SHA-256 (hex) of the frame's rows, independent of row and column order, without `exclude`."""
    kept = frame.drop([name for name in exclude if name in frame.columns])
    columns = sorted(kept.columns)
    digest = hashlib.sha256()
    for name in columns:
        digest.update(f"{name}:{kept.schema[name]}\n".encode())
    lines: list[str] = []
    step = _rows_per_slice(kept)
    for offset in range(0, kept.height if columns else 0, step):  # never the whole frame as one text
        lines += kept.slice(offset, step).select(columns).write_ndjson().splitlines()
    for line in sorted(lines):
        digest.update(line.encode())
        digest.update(b"\n")
    return digest.hexdigest()


def _rows_per_slice(frame: pl.DataFrame, slice_bytes: int = 16 * 1024 * 1024) -> int:
    """Rows of `frame` in about `slice_bytes`: a cell of replies with a megabyte of reasoning each is
    written as JSON a few replies at a time (its text held once, as lines, not twice)."""
    size = int(frame.estimated_size())
    return max(1, frame.height if size <= slice_bytes else frame.height * slice_bytes // size)

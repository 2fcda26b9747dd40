"""Candidates' 1st-phase pass rates per edition (`registry/pass_rates.toml` → `candidate_pass_rates`).

Each entry gives the figure as its source gives it: the rate, the counts when given, what the rate is taken over
(`denominator_kind`: present candidates, inscribed ones, ...) and whether it is before or after appeals. A pass
rate counts who passed; it is not a distribution of scores, and no per-question data of candidates is public.
"""

from __future__ import annotations

import datetime as dt
import tomllib
from pathlib import Path

import polars as pl

from oabench_pipeline.core.editions import REGISTRY_DIR
from oabench_pipeline.core.tables import TABLES

PASS_RATES_FILE = REGISTRY_DIR / "pass_rates.toml"
DENOMINATOR_KINDS = {"present", "inscribed", "inscribed_approx", "present_approx", "not_given"}
STAGES = {"final", "preliminary"}
RATE_TOLERANCE = 0.005  # a source's rounding: its percentage against approved / denominator

PASS_RATE_CAVEAT = (
    "A pass rate counts the candidates who passed the 1st phase (40 of 80); it is not a distribution of "
    "scores, and no per-question data of candidates is public, so models cannot be placed among candidates."
)


class PassRatesError(ValueError):
    """The pass-rates registry cannot be used; the message names the file, the entry and the field."""


def load_pass_rates(path: Path = PASS_RATES_FILE) -> pl.DataFrame:
    """The registry's entries as `candidate_pass_rates` rows, one per edition."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise PassRatesError(f"{path}: {error}") from None
    rows = [_row(path, index, entry) for index, entry in enumerate(data.get("edition", []))]
    editions = [int(str(row["edition"])) for row in rows]
    duplicates = sorted({e for e in editions if editions.count(e) > 1})
    if duplicates:
        raise PassRatesError(f"{path}: edition(s) {duplicates} listed more than once")
    schema = {column.name: column.dtype for column in TABLES["candidate_pass_rates"]}
    return pl.DataFrame(rows, schema=schema).sort("edition")


def _row(path: Path, index: int, entry: dict[str, object]) -> dict[str, object]:
    where = f"{path}: edition entry {index + 1}"
    source = entry.get("source")
    if not isinstance(source, dict) or not source.get("url") or not source.get("title"):
        raise PassRatesError(f"{where}: field 'source' needs a url and a title")
    kind = entry.get("denominator_kind")
    if kind not in DENOMINATOR_KINDS:
        raise PassRatesError(
            f"{where}: field 'denominator_kind' is {kind!r}, not one of {sorted(DENOMINATOR_KINDS)}"
        )
    stage = entry.get("stage")
    if stage not in STAGES:
        raise PassRatesError(f"{where}: field 'stage' is {stage!r}, not one of {sorted(STAGES)}")
    if not isinstance(entry.get("edition"), int):
        raise PassRatesError(f"{where}: field 'edition' must be an edition number")
    if entry.get("pass_rate") is None and entry.get("approved") is None:
        raise PassRatesError(f"{where}: give 'pass_rate' or 'approved'")
    date = source.get("date")
    if date is not None and not isinstance(date, dt.date):
        raise PassRatesError(f"{where}: field 'source.date' must be a TOML date (YYYY-MM-DD)")
    return {
        "edition": entry["edition"],
        "pass_rate": entry.get("pass_rate"),
        "approved": entry.get("approved"),
        "denominator": entry.get("denominator"),
        "denominator_kind": kind,
        "stage": stage,
        "note": entry.get("note"),
        "source_url": source["url"],
        "source_title": source["title"],
        "source_date": date,
    }


def pass_rate_problems(table: pl.DataFrame) -> list[str]:
    """Rates outside [0, 1], or off approved / denominator by more than a source's rounding."""
    problems = []
    for row in table.iter_rows(named=True):
        rate = row["pass_rate"]
        if rate is not None and not 0 <= rate <= 1:
            problems.append(f"edition {row['edition']}: rate {rate} outside [0, 1]")
        if rate is not None and row["approved"] is not None and row["denominator"]:
            computed = row["approved"] / row["denominator"]
            if abs(computed - rate) > RATE_TOLERANCE:
                problems.append(
                    f"edition {row['edition']}: rate {rate} but {row['approved']}/{row['denominator']} = {computed:.4f}"
                )
    return problems


def with_candidates_rate(by_edition: pl.DataFrame, rates: pl.DataFrame) -> pl.DataFrame:
    """`leaderboard_by_edition` rows with each edition's candidates' pass rate beside the models' scores:
    `candidates_pass_rate` and `candidates_rate_of` (what it is taken over); NULL where none was verified."""
    if rates.is_empty():
        return by_edition.with_columns(
            candidates_pass_rate=pl.lit(None, pl.Float64), candidates_rate_of=pl.lit(None, pl.String)
        )
    beside = rates.select(
        pl.col("edition").cast(by_edition.schema["edition"]),
        candidates_pass_rate=pl.col("pass_rate"),
        candidates_rate_of=pl.col("denominator_kind"),
    )
    return by_edition.join(beside, on="edition", how="left", maintain_order="left")

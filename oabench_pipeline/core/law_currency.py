"""Law currency: which questions were written under law that changed after their exam (docs/law_currency.md).

Two registry files people edit (`registry/legal_reforms.toml`, `registry/law_currency_notes.toml`):

- a reform touches OAB areas (named as the editions registry's area schemes name them) and came into force
  on a date; a question is flagged `possibly_superseded` when some reform touching its area came into force
  after its exam's date (`reforms_after`). The flag is area-level: it marks questions to read with care,
  not questions known to be wrong; it is not a legal judgment.
- a note says of one question that it is known to be outdated, or known still to hold, with its source;
  it overrides the area-level flag.

Every mistake in either file is one line naming the file, the line and the field (`core/toml_errors.py`).
No Dagster here: `core/leaderboard.py` builds the tables from these.
"""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from oabench_pipeline.core.editions import DEFAULT_EDITIONS_FILE, REGISTRY_DIR
from oabench_pipeline.core.tables import column_names, column_schema
from oabench_pipeline.core.toml_errors import (
    TomlFileError,
    field_line,
    syntax_error,
    table_spans,
    validation_error,
)

DEFAULT_REFORMS_FILE = REGISTRY_DIR / "legal_reforms.toml"
DEFAULT_NOTES_FILE = REGISTRY_DIR / "law_currency_notes.toml"

DISCLAIMER = (
    "The area-level flag marks questions to read with care: a reform of the question's area came into "
    "force after its exam. It is not a legal judgment that the official answer is wrong today."
)

_REFORM_HEADER = re.compile(r"^\s*\[\[\s*reforms\s*\]\]")
_NOTE_HEADER = re.compile(r"^\s*\[\[\s*notes\s*\]\]")
_QID = re.compile(r"^oab-[1-9][0-9]*-1f-q[1-9][0-9]*$")


class LawCurrencyError(TomlFileError):
    """A legal-reforms or law-currency-notes file that cannot be used (file:line: field: problem)."""


class Reform(BaseModel):
    """One act that rewrote law the exam asks about."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")
    act: str = Field(min_length=1)
    name: str = Field(min_length=1)
    published: dt.date
    in_force: dt.date
    in_force_rule: str = Field(min_length=1)
    areas: tuple[str, ...] = Field(min_length=1)
    source: str = Field(pattern=r"^https://(www\.)?planalto\.gov\.br/\S+$")
    verified: str = Field(min_length=1)


class QuestionNote(BaseModel):
    """What is known of one question's answer under later law, and who says so."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    qid: str = Field(pattern=_QID.pattern)
    verdict: Literal["outdated", "holds"]
    reforms: tuple[str, ...] = ()
    note: str = Field(min_length=1)
    source: str = Field(min_length=1)


@dataclass(frozen=True)
class LawCurrency:
    """The two files, validated against each other and against the areas the editions registry names."""

    reforms: tuple[Reform, ...]
    notes: tuple[QuestionNote, ...]


def _read(path: Path) -> tuple[str, list[str], dict]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise LawCurrencyError(path, None, None, f"cannot read: {error.strerror or error}") from None
    lines = text.splitlines()
    try:
        return text, lines, tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise syntax_error(LawCurrencyError, path, lines, error) from None


def _entries(path: Path, lines: list[str], data: dict, table: str, header: re.Pattern[str]) -> list:
    entries = data.get(table, [])
    unknown = sorted(set(data) - {table})
    if unknown:
        raise LawCurrencyError(
            path, 1, unknown[0], f"unknown table or key (the file holds [[{table}]] entries)"
        )
    if not isinstance(entries, list):
        raise LawCurrencyError(path, 1, table, f"must be [[{table}]] tables")
    if not entries:
        return []
    spans = table_spans(lines, header)
    return [(entry, spans[i] if i < len(spans) else None) for i, entry in enumerate(entries)]


def parse_reforms(path: Path, known_areas: Collection[str]) -> tuple[Reform, ...]:
    """The reforms of `path`, each area one the editions registry names, each id once; sorted by date."""
    _, lines, data = _read(path)
    reforms: list[Reform] = []
    seen: set[str] = set()
    for entry, span in _entries(path, lines, data, "reforms", _REFORM_HEADER):
        try:
            reform = Reform.model_validate(entry)
        except ValidationError as error:
            raise validation_error(LawCurrencyError, path, lines, span, error, "reform") from None
        unknown = [a for a in reform.areas if a not in known_areas]
        if unknown:
            raise LawCurrencyError(
                path,
                field_line(lines, span, "areas"),
                "areas",
                f"{unknown[0]!r} is not an area of the editions registry's schemes "
                f"(they name: {', '.join(sorted(known_areas))})",
            )
        if reform.in_force < reform.published:
            raise LawCurrencyError(
                path,
                field_line(lines, span, "in_force"),
                "in_force",
                f"in_force {reform.in_force} is before published {reform.published}",
            )
        if reform.id in seen:
            raise LawCurrencyError(
                path, field_line(lines, span, "id"), "id", f"reform {reform.id!r} listed twice"
            )
        seen.add(reform.id)
        reforms.append(reform)
    return tuple(sorted(reforms, key=lambda r: (r.in_force, r.id)))


def parse_notes(path: Path, reform_ids: Collection[str]) -> tuple[QuestionNote, ...]:
    """The notes of `path`: each question once, each reform one `legal_reforms.toml` lists."""
    if not path.is_file():
        return ()
    _, lines, data = _read(path)
    notes: list[QuestionNote] = []
    seen: set[str] = set()
    for entry, span in _entries(path, lines, data, "notes", _NOTE_HEADER):
        try:
            note = QuestionNote.model_validate(entry)
        except ValidationError as error:
            raise validation_error(LawCurrencyError, path, lines, span, error, "note") from None
        unknown = [r for r in note.reforms if r not in reform_ids]
        if unknown:
            raise LawCurrencyError(
                path,
                field_line(lines, span, "reforms"),
                "reforms",
                f"no reform {unknown[0]!r} in legal_reforms.toml",
            )
        if note.qid in seen:
            raise LawCurrencyError(path, field_line(lines, span, "qid"), "qid", f"{note.qid} has two notes")
        seen.add(note.qid)
        notes.append(note)
    return tuple(notes)


def registry_areas(editions_file: Path = DEFAULT_EDITIONS_FILE) -> set[str]:
    """Every area the editions registry's area schemes name."""
    document = tomllib.loads(editions_file.read_text(encoding="utf-8"))
    return {span["area"] for scheme in document.get("area_schemes", {}).values() for span in scheme}


def load_law_currency(
    reforms_file: Path = DEFAULT_REFORMS_FILE,
    notes_file: Path = DEFAULT_NOTES_FILE,
    editions_file: Path = DEFAULT_EDITIONS_FILE,
) -> LawCurrency:
    """Both files, validated; the areas are checked against the editions registry's schemes."""
    reforms = parse_reforms(reforms_file, registry_areas(editions_file))
    return LawCurrency(reforms, parse_notes(notes_file, {r.id for r in reforms}))


def legal_reforms_table(law: LawCurrency, currency: pl.DataFrame) -> pl.DataFrame:
    """The `legal_reforms` table: one row per reform, with how many questions of `currency` (the
    `question_law_currency` table) its area-level flag reaches."""
    counts = (
        currency.select("reforms_after").explode("reforms_after").drop_nulls().group_by("reforms_after").len()
    )
    per_reform = dict(zip(counts["reforms_after"].to_list(), counts["len"].to_list(), strict=True))
    rows = [
        {
            "reform": r.id,
            "act": r.act,
            "name": r.name,
            "published": r.published,
            "in_force": r.in_force,
            "in_force_rule": r.in_force_rule,
            "areas": list(r.areas),
            "source_url": r.source,
            "verified": r.verified,
            "questions_flagged": int(per_reform.get(r.id, 0)),
        }
        for r in law.reforms
    ]
    return pl.DataFrame(rows, schema=column_schema("legal_reforms")).select(column_names("legal_reforms"))


def question_law_currency(
    questions: pl.DataFrame, exam_dates: pl.DataFrame, law: LawCurrency
) -> pl.DataFrame:
    """The `question_law_currency` table: one row per question of `questions` (qid, edition, number, area),
    its exam's date from `exam_dates` (edition, exam_date), the reforms touching its area in force after
    that date, the area-level flag, and a note that overrides it. A question whose edition has no date
    gets no reform (nothing says it predates one)."""
    base = questions.select("qid", "edition", "number", "area").join(
        exam_dates.select(pl.col("edition").cast(pl.Int32), "exam_date"),
        on="edition",
        how="left",
        maintain_order="left",
    )
    reforms = pl.DataFrame(
        [(r.id, r.in_force, area) for r in law.reforms for area in r.areas],
        schema={"reform": pl.String, "in_force": pl.Date, "area": pl.String},
        orient="row",
    )
    after = (
        base.select("qid", "area", "exam_date")
        .join(reforms, on="area", how="inner")
        .filter(pl.col("in_force") > pl.col("exam_date"))
        .sort("in_force", "reform")
        .group_by("qid", maintain_order=True)
        .agg(reforms_after=pl.col("reform"))
    )
    notes = pl.DataFrame(
        [(n.qid, n.verdict, n.note, n.source) for n in law.notes],
        schema={"qid": pl.String, "note_verdict": pl.String, "note": pl.String, "note_source": pl.String},
        orient="row",
    )
    table = (
        base.with_columns(pl.col("edition").cast(pl.Int32))
        .join(after, on="qid", how="left", maintain_order="left")
        .join(notes, on="qid", how="left", maintain_order="left")
        .with_columns(reforms_after=pl.col("reforms_after").fill_null(pl.lit([], pl.List(pl.String))))
        .with_columns(area_flag=pl.col("reforms_after").list.len() > 0)
        .with_columns(
            possibly_superseded=pl.when(pl.col("note_verdict") == "outdated")
            .then(True)
            .when(pl.col("note_verdict") == "holds")
            .then(False)
            .otherwise(pl.col("area_flag"))
        )
    )
    return table.select(column_names("question_law_currency")).sort("edition", "number")


def flag_counts(currency: pl.DataFrame, reforms: pl.DataFrame, editions: Collection[int]) -> pl.DataFrame:
    """How many questions of `editions` each flag leaves: `current law` and `possibly superseded` (the
    two add up to the questions), then per reform of `reforms` (the `legal_reforms` table) the questions
    its area-level flag reaches (a question under two reforms counts under each), then the notes' verdicts.
    Columns: flag, questions. What `oabench leaderboard --current-law`, the report and the site show."""
    rows = currency.filter(pl.col("edition").is_in(list(editions)))
    superseded = int(rows["possibly_superseded"].sum())
    counts = [("current law", rows.height - superseded), ("possibly superseded", superseded)]
    per_reform = (
        rows.select("reforms_after").explode("reforms_after").drop_nulls()["reforms_after"].value_counts()
    )
    reached = dict(zip(per_reform["reforms_after"].to_list(), per_reform["count"].to_list(), strict=True))
    for reform, in_force in reforms.select("reform", "in_force").iter_rows():
        counts.append((f"under {reform} (in force {in_force})", int(reached.get(reform, 0))))
    for verdict in ("outdated", "holds"):
        counts.append((f"a note says it {verdict}", int((rows["note_verdict"] == verdict).sum())))
    return pl.DataFrame(counts, schema={"flag": pl.String, "questions": pl.Int64}, orient="row")

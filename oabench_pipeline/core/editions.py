"""The editions registry: which OAB editions exist, where their official PDFs are, their area table, and
the named suites (sets of editions) a leaderboard ranks over.

An edition also says what its answer key is (`key_status`: the archived key of most editions before the
26th is the preliminary one) and which annulments that key does not show (`annulled`, with
`annulled_source`): a question the organizers annulled after a preliminary key is annulled here, and the
tables record that the registry, not the key, says so. A question whose later key is unknown and disputed
is `unresolved` (number -> reason): scored on no answer at all.
"""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from oabench_pipeline.core.edition_names import YEAR_NAMED_EDITIONS
from oabench_pipeline.core.records import AnswerKeyEntry, KeyStatus, Letter, QuestionStatus

REGISTRY_DIR = Path(__file__).resolve().parents[1] / "registry"
DEFAULT_EDITIONS_FILE = REGISTRY_DIR / "editions.toml"

FileKind = Literal["booklet", "answer_key"]


class EditionsRegistryError(ValueError):
    """The editions registry cannot be used; the message names the file and the problem."""


class PinnedFile(BaseModel):
    """An official PDF, pinned by the SHA-256 of its bytes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: str
    url: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int | None = Field(default=None, ge=1)
    # Provenance of a file pinned from an archive: the examiners' own download address of the same bytes.
    official_url: str | None = None


class AreaRange(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    first: int = Field(ge=1)
    last: int = Field(ge=1)
    area: str


class Edition(BaseModel):
    """One 1st-phase edition: its official files, its key's status and the area of each question number."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    edition: int = Field(ge=1)
    exam_name: str
    # The name the first three exams went by instead of a number ("2010.1" for the 1st, see edition_names).
    exam_label: str | None = None
    exam_date: dt.date
    # The edition's page on the OAB portal; None for an archived edition whose page is not known.
    exam_page_url: str | None = None
    area_scheme: str
    booklet: PinnedFile
    answer_key: PinnedFile
    areas: tuple[AreaRange, ...] = ()
    question_count: int = Field(default=80, ge=1)
    key_status: KeyStatus = "definitive"
    # Questions annulled that the pinned key does not show as annulled (a preliminary key), and who says so.
    annulled: tuple[int, ...] = ()
    annulled_source: str | None = None
    # Questions whose later key is unknown and disputed (number -> why): left out of both scores.
    unresolved: dict[int, str] = Field(default_factory=dict)
    pinned_by: Literal["registry", "first-download"] = "registry"

    @property
    def partition_key(self) -> str:
        return str(self.edition)

    @property
    def annulled_status_source(self) -> str:
        """How the tables record an annulment that comes from the registry rather than the key."""
        return f"registry: {self.annulled_source}"

    def file(self, kind: FileKind) -> PinnedFile:
        return self.booklet if kind == "booklet" else self.answer_key

    def area_of(self, number: int) -> str:
        for span in self.areas:
            if span.first <= number <= span.last:
                return span.area
        raise EditionsRegistryError(f"edition {self.edition}: no area covers question {number}")

    @model_validator(mode="after")
    def _areas_cover_every_question(self) -> Edition:
        covered = sorted(n for span in self.areas for n in range(span.first, span.last + 1))
        if self.areas and covered != list(range(1, self.question_count + 1)):
            raise ValueError(
                f"area scheme {self.area_scheme!r} must cover questions 1-{self.question_count} exactly once"
            )
        return self

    @model_validator(mode="after")
    def _annulments_are_sourced_questions(self) -> Edition:
        outside = [n for n in self.annulled if not 1 <= n <= self.question_count]
        if outside:
            raise ValueError(f"annulled questions {outside} are outside 1-{self.question_count}")
        if len(set(self.annulled)) != len(self.annulled):
            raise ValueError(f"annulled lists a question twice: {list(self.annulled)}")
        if bool(self.annulled) != bool(self.annulled_source and self.annulled_source.strip()):
            raise ValueError("annulled and annulled_source go together: say which questions and who says so")
        return self

    @model_validator(mode="after")
    def _unresolved_are_explained_questions(self) -> Edition:
        outside = sorted(n for n in self.unresolved if not 1 <= n <= self.question_count)
        if outside:
            raise ValueError(f"unresolved questions {outside} are outside 1-{self.question_count}")
        both = sorted(set(self.unresolved) & set(self.annulled))
        if both:
            raise ValueError(f"questions {both} are both annulled and unresolved: an annulment is resolved")
        unexplained = sorted(n for n, why in self.unresolved.items() if not why.strip())
        if unexplained:
            raise ValueError(
                f"unresolved questions {unexplained} need their reason (why the later key is unknown)"
            )
        return self

    @model_validator(mode="after")
    def _label_names_this_edition(self) -> Edition:
        if self.exam_label is not None and YEAR_NAMED_EDITIONS.get(self.exam_label) != self.edition:
            known = ", ".join(f"{label} = {number}" for label, number in YEAR_NAMED_EDITIONS.items())
            raise ValueError(f"exam_label {self.exam_label!r} does not name edition {self.edition} ({known})")
        return self


UNRESOLVED_STATUS_SOURCE = "registry: unresolved"
"""`status_source` of a question the registry holds unresolved (its reason is in `status_note`)."""


class KeyProvenance(BaseModel):
    """A question's answer, its status and where they come from (the `answer_keys` columns).

    `key_document`: the document the answer comes from: the pinned key's kind, or `definitive` for an
    annulment the registry adds after a preliminary key (the later key, as transcribed). A notice in the
    key file that corrects the preliminary grid (the 28th's COMUNICADO) keeps it `preliminary`.
    `changed_after_preliminary`: TRUE when the answer is known to differ from the preliminary key's (a
    notice, an annulment); FALSE when it is the preliminary key's and no later change is known; NULL when
    that cannot be told (a definitive key, whose preliminary is not pinned; an unresolved question).
    `preliminary_correct`: the preliminary key's letter, when the pinned key shows it.
    """

    model_config = ConfigDict(frozen=True)

    correct: Letter | None
    status: QuestionStatus
    status_source: str
    key_document: KeyStatus
    changed_after_preliminary: bool | None
    preliminary_correct: Letter | None
    status_note: str | None


def key_provenance(edition: Edition, entry: AnswerKeyEntry) -> KeyProvenance:
    """What the tables record for one key entry of `edition`: its answer and status after the registry's
    annulments and unresolved questions, and where each comes from."""
    preliminary = edition.key_status == "preliminary"
    printed = entry.printed if entry.changed_by else entry.correct
    preliminary_correct = printed if preliminary else None
    if entry.number in edition.unresolved:
        return KeyProvenance(
            correct=None,
            status="unresolved",
            status_source=UNRESOLVED_STATUS_SOURCE,
            key_document=edition.key_status,
            changed_after_preliminary=None,
            preliminary_correct=preliminary_correct,
            status_note=f"unresolved: {edition.unresolved[entry.number]}",
        )
    if entry.status == "active" and entry.number in edition.annulled:
        return KeyProvenance(
            correct=None,
            status="annulled",
            status_source=edition.annulled_status_source,
            key_document="definitive" if preliminary else edition.key_status,
            changed_after_preliminary=True if preliminary else None,
            preliminary_correct=preliminary_correct,
            status_note=f"annulled by the later key (source: {edition.annulled_source})",
        )
    changed = entry.changed_by is not None
    return KeyProvenance(
        correct=entry.correct,
        status=entry.status,
        status_source="key",
        key_document=edition.key_status,
        changed_after_preliminary=changed if preliminary else (True if changed else None),
        preliminary_correct=preliminary_correct,
        status_note=(
            f"changed from {entry.printed or '*'} to {entry.correct or '*'} by the {entry.changed_by}"
            if changed
            else None
        ),
    )


def parse_editions(document: dict, source: str) -> list[Edition]:
    """Validate a parsed registry document; `source` names it in error messages."""
    schemes = document.get("area_schemes", {})
    editions: list[Edition] = []
    for index, raw in enumerate(document.get("editions", [])):
        scheme_name = raw.get("area_scheme")
        if scheme_name not in schemes:
            raise EditionsRegistryError(
                f"{source}: edition #{index + 1} ({raw.get('edition')}): unknown area_scheme {scheme_name!r}"
            )
        try:
            editions.append(Edition.model_validate({**raw, "areas": schemes[scheme_name]}))
        except ValidationError as error:
            raise EditionsRegistryError(
                f"{source}: edition #{index + 1} ({raw.get('edition')}): {_one_line(error)}"
            ) from None
    numbers = [e.edition for e in editions]
    duplicates = sorted({n for n in numbers if numbers.count(n) > 1})
    if duplicates:
        raise EditionsRegistryError(f"{source}: editions listed twice: {duplicates}")
    parse_suites(document, source, numbers)  # a registry with a bad suite is a bad registry, for every reader
    return sorted(editions, key=lambda e: e.edition)


def _one_line(error: ValidationError) -> str:
    """The first problem as `field 'x': message` (a whole-edition rule names no field), and how many more."""
    problems = error.errors()
    first = problems[0]
    message = first["msg"].removeprefix("Value error, ")
    field = ".".join(str(part) for part in first["loc"])
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return (f"field '{field}': {message}" if field else message) + more


def load_editions(path: Path = DEFAULT_EDITIONS_FILE) -> list[Edition]:
    """Read and validate the editions registry TOML file."""
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise EditionsRegistryError(f"{path}: {error}") from None
    return parse_editions(document, str(path))


def editions_by_key(editions: list[Edition]) -> dict[str, Edition]:
    return {e.partition_key: e for e in editions}


def known_editions(registry_file: Path, discovered_file: Path | None = None) -> dict[str, Edition]:
    """The registry's editions, plus those the portal sensor discovered (a registry entry wins)."""
    known = editions_by_key(load_editions(registry_file))
    if discovered_file is not None and discovered_file.is_file():
        for key, edition in editions_by_key(load_editions(discovered_file)).items():
            known.setdefault(key, edition)
    return known


# ---------------------------------------------------------------------------------------------------------
# Suites: which editions a leaderboard ranks
# ---------------------------------------------------------------------------------------------------------

DEFAULT_SUITE = "oabench-2026"
"""The OABench study's suite (43rd–45th editions): what `oabench leaderboard` and `leaderboard` rank."""
ALL_SUITE = "all"
"""Built in: every edition the registry and the portal sensor know (a discovered edition joins it)."""
ALL_SUITE_DESCRIPTION = "Every edition the editions registry and the portal sensor know"
_SUITE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_SUITE_FIELDS = {"editions", "description"}


class Suite(BaseModel):
    """A named set of editions: a model key is ranked in the suite when every edition of it that has
    questions in the warehouse has a complete canonical run (`core/leaderboard.py`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    editions: tuple[int, ...]
    """Sorted, each once."""
    description: str = ""

    @property
    def label(self) -> str:
        """`oabench-2026 (editions 43-45)`: how commands name the suite."""
        return f"{self.name} (editions {format_editions(self.editions)})"


def parse_edition_spec(spec: str) -> list[int]:
    """`"1-25,37"` → [1, 2, …, 25, 37]: comma-separated edition numbers and inclusive ranges, sorted, each
    once. Raises ValueError (its message says which part is wrong) for anything else."""
    editions: set[int] = set()
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        first, dash, last = part.partition("-")
        if not first.strip().isdigit() or (dash and not last.strip().isdigit()):
            raise ValueError(f"{part!r} is not an edition number or a range like 1-25")
        low, high = int(first), int(last) if dash else int(first)
        if low < 1 or high < low:
            raise ValueError(f"{part!r}: editions start at 1 and a range goes up (1-25)")
        editions.update(range(low, high + 1))
    if not editions:
        raise ValueError(f"{spec!r} names no edition")
    return sorted(editions)


def format_editions(editions: Iterable[int]) -> str:
    """[1, 2, 3, 5, 43, 44, 45] → `1-3,5,43-45` (what `parse_edition_spec` reads back)."""
    ordered = sorted(set(editions))
    runs: list[list[int]] = []
    for number in ordered:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return ",".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def _suite_editions_value(value: object, where: str) -> list[int]:
    """A suite's `editions`: a list of numbers, or a range text ("3-25,37"); no edition twice."""
    if isinstance(value, str):
        try:
            return parse_edition_spec(value)
        except ValueError as error:
            raise EditionsRegistryError(f"{where}: editions {error}") from None
    if not isinstance(value, list) or not all(isinstance(n, int) and not isinstance(n, bool) for n in value):
        raise EditionsRegistryError(
            f'{where}: editions must be a list of edition numbers ([43, 44, 45]) or a range text ("3-25,37")'
        )
    twice = sorted({n for n in value if value.count(n) > 1})
    if twice:
        raise EditionsRegistryError(f"{where}: edition(s) {', '.join(map(str, twice))} listed twice")
    return sorted(value)


def parse_suites(document: dict, source: str, editions: Collection[int]) -> dict[str, Suite]:
    """The `[suites]` table of a registry document, checked against its `editions`, in file order.

    Each problem is one line naming `source` and the suite: a name that is not lowercase letters, digits,
    `.`, `_`, `-`; the reserved `all`; an unknown field; no editions; an edition listed twice or not in the
    registry. (A name given twice is a TOML error already: the file does not parse.)
    """
    raw = document.get("suites", {})
    if not isinstance(raw, dict):
        raise EditionsRegistryError(
            f"{source}: [suites] must be a table: [suites.NAME] with editions = [...]"
        )
    known = set(editions)
    suites: dict[str, Suite] = {}
    for name, entry in raw.items():
        where = f"{source}: suite {name!r}"
        if name == ALL_SUITE:
            raise EditionsRegistryError(
                f"{where} is built in ({ALL_SUITE_DESCRIPTION.lower()}): give yours another name"
            )
        if not _SUITE_NAME.match(name):
            raise EditionsRegistryError(
                f"{where}: a name is 1-64 lowercase letters, digits, '.', '_' or '-' (e.g. fgv-2010s)"
            )
        if not isinstance(entry, dict):
            raise EditionsRegistryError(f"{where}: must be a table with editions = [...] (and a description)")
        unknown_fields = sorted(set(entry) - _SUITE_FIELDS)
        if unknown_fields:
            raise EditionsRegistryError(
                f"{where}: unknown field(s) {', '.join(unknown_fields)} (a suite has editions and description)"
            )
        if "editions" not in entry or entry["editions"] in ([], ""):
            raise EditionsRegistryError(f"{where}: no editions (an empty suite ranks nothing)")
        numbers = _suite_editions_value(entry["editions"], where)
        missing = [n for n in numbers if n not in known]
        if missing:
            raise EditionsRegistryError(
                f"{where}: edition(s) {format_editions(missing)} not in the registry "
                f"(it has {format_editions(known) or 'none'})"
            )
        description = entry.get("description", "")
        if not isinstance(description, str):
            raise EditionsRegistryError(f"{where}: description must be text")
        suites[name] = Suite(name=name, editions=tuple(numbers), description=description)
    return suites


def load_suites(
    registry_file: Path = DEFAULT_EDITIONS_FILE, discovered_file: Path | None = None
) -> dict[str, Suite]:
    """Every suite: the registry's `[suites]` in file order, then the built-in `all` (the registry's
    editions plus those the portal sensor discovered)."""
    try:
        document = tomllib.loads(registry_file.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise EditionsRegistryError(f"{registry_file}: {error}") from None
    registry = parse_editions(document, str(registry_file))
    suites = parse_suites(document, str(registry_file), [e.edition for e in registry])
    known = {e.edition for e in registry}
    if discovered_file is not None and discovered_file.is_file():
        known |= {e.edition for e in load_editions(discovered_file)}
    suites[ALL_SUITE] = Suite(
        name=ALL_SUITE, editions=tuple(sorted(known)), description=ALL_SUITE_DESCRIPTION
    )
    return suites


def default_suite(suites: Mapping[str, Suite]) -> Suite:
    """`oabench-2026` when the registry defines it (the packaged one does), else `all`: a registry of
    one's own (`OABENCH_EDITIONS_FILE`) without that suite ranks every edition, as before suites."""
    return suites.get(DEFAULT_SUITE) or suites[ALL_SUITE]


def resolve_suite(name: str | None, suites: Mapping[str, Suite]) -> Suite:
    """The suite called `name` (None: the default); an unknown name is one line listing the known ones."""
    if name is None:
        return default_suite(suites)
    if name not in suites:
        raise EditionsRegistryError(f"unknown suite {name!r}; the registry has: {', '.join(suites)}")
    return suites[name]


def suite_editions(name: str | None, suites: Mapping[str, Suite]) -> list[int]:
    """The editions of suite `name` (None: the default suite), sorted."""
    return list(resolve_suite(name, suites).editions)

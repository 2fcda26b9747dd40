"""The editions registry: which OAB editions exist, where their official PDFs are, and their area table.

An edition also says what its answer key is (`key_status`: the archived key of most editions before the
26th is the preliminary one) and which annulments that key does not show (`annulled`, with
`annulled_source`): a question the organizers annulled after a preliminary key is annulled here, and the
tables record that the registry, not the key, says so.
"""

from __future__ import annotations

import datetime as dt
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from oabench_pipeline.core.edition_names import YEAR_NAMED_EDITIONS
from oabench_pipeline.core.records import KeyStatus

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
    def _label_names_this_edition(self) -> Edition:
        if self.exam_label is not None and YEAR_NAMED_EDITIONS.get(self.exam_label) != self.edition:
            known = ", ".join(f"{label} = {number}" for label, number in YEAR_NAMED_EDITIONS.items())
            raise ValueError(f"exam_label {self.exam_label!r} does not name edition {self.edition} ({known})")
        return self


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

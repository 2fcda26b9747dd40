"""The phase-2 sources registry (`registry/phase2.toml`): OAB-Bench's files pinned at one commit."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from oabench_pipeline.core.editions import REGISTRY_DIR, PinnedFile

DEFAULT_PHASE2_FILE = REGISTRY_DIR / "phase2.toml"

Phase2FileKind = Literal["questions", "standards", "judge_prompts"]
PHASE2_FILE_KINDS: tuple[Phase2FileKind, ...] = ("questions", "standards", "judge_prompts")


class Phase2SourcesError(ValueError):
    """The phase-2 sources registry cannot be used; the message names the file and the problem."""


class Phase2File(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    url: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int = Field(ge=1)

    def pinned(self, kind: str) -> PinnedFile:
        """The same pin in the shape the PDF downloader takes."""
        return PinnedFile(label=kind, url=self.url, sha256=self.sha256, bytes=self.bytes)


class Phase2Source(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    repository: str
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    commit_date: str
    paper: str
    editions: tuple[int, ...]


class Phase2Sources(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    source: Phase2Source
    files: dict[Phase2FileKind, Phase2File]

    def file(self, kind: Phase2FileKind) -> Phase2File:
        return self.files[kind]

    @property
    def edition_keys(self) -> list[str]:
        return [str(e) for e in self.source.editions]


def load_phase2_sources(path: Path = DEFAULT_PHASE2_FILE) -> Phase2Sources:
    """The registry, validated; a problem raises `Phase2SourcesError` in one line naming the file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        sources = Phase2Sources.model_validate(data)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise Phase2SourcesError(f"{path}: {error}") from None
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise Phase2SourcesError(f"{path}: field '{where}': {first['msg']}") from None
    missing = [kind for kind in PHASE2_FILE_KINDS if kind not in sources.files]
    if missing:
        raise Phase2SourcesError(f"{path}: no [files.{missing[0]}] pin")
    return sources

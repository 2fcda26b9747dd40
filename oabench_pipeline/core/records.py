"""Typed records that cross module boundaries: what a booklet and an answer key yield."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Letter = Literal["A", "B", "C", "D"]
LETTERS: tuple[Letter, ...] = ("A", "B", "C", "D")
QuestionStatus = Literal["active", "annulled", "unresolved"]
KeyStatus = Literal["definitive", "preliminary"]


def make_qid(edition: int, number: int) -> str:
    """The question id used by published OABench runs, so they can be imported and compared."""
    return f"oab-{edition}-1f-q{number}"


class ParsedQuestion(BaseModel):
    """One question as read from the booklet PDF, before the answer key and areas are joined."""

    model_config = ConfigDict(frozen=True)

    number: int = Field(ge=1)
    stem: str
    choice_a: str
    choice_b: str
    choice_c: str
    choice_d: str
    pages: list[int] = Field(description="1-based page numbers the question spans, in order")
    requires_image: bool = False


class ParsedBooklet(BaseModel):
    """Everything read from one booklet PDF."""

    model_config = ConfigDict(frozen=True)

    edition_in_header: int | None = Field(description="Edition number printed in the running header")
    questions: list[ParsedQuestion]


class AnswerKeyEntry(BaseModel):
    """One row of the answer key for booklet TIPO 1. `correct` is None when annulled.

    When a notice in the key file changes the letter its grid prints (the 28th's COMUNICADO), `correct` is
    the notice's letter, `printed` the grid's and `changed_by` names the notice."""

    model_config = ConfigDict(frozen=True)

    number: int = Field(ge=1)
    correct: Letter | None
    printed: Letter | None = None
    changed_by: str | None = None

    @property
    def status(self) -> QuestionStatus:
        return "annulled" if self.correct is None else "active"


class ParsedAnswerKey(BaseModel):
    """Everything read from one answer-key PDF for one booklet type."""

    model_config = ConfigDict(frozen=True)

    edition_in_header: int | None
    entries: list[AnswerKeyEntry]
    status_in_title: KeyStatus | None = Field(
        default=None, description="What the key calls itself: GABARITOS DEFINITIVOS / PRELIMINARES"
    )
    shape: str = Field(default="", description="Which layout rule read it (core/answer_key.py: SHAPES)")
    table_heading: str = Field(default="", description="The heading of the table taken, as printed")

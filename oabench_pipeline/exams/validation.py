"""The exam checks, grouped by the asset check they report to. Each returns human-readable problems."""

from __future__ import annotations

import polars as pl

from oabench_pipeline.core import exam_validation
from oabench_pipeline.core.editions import Edition
from oabench_pipeline.core.records import ParsedAnswerKey, ParsedBooklet


def edition_mismatch(found: int | None, expected: int) -> list[str]:
    """A 45th booklet pinned as the 44th is caught by the edition printed in the running header."""
    if found is None:
        return [f"no edition number found in the header (expected {expected})"]
    return [] if found == expected else [f"header says edition {found}, registry says {expected}"]


def answer_key_coverage(key: ParsedAnswerKey, expected: int) -> list[str]:
    numbers = [e.number for e in key.entries]
    problems = []
    missing = sorted(set(range(1, expected + 1)) - set(numbers))
    if missing:
        problems.append(f"no answer for questions {missing}")
    extra = sorted(set(numbers) - set(range(1, expected + 1)))
    if extra:
        problems.append(f"answers for questions outside 1-{expected}: {extra}")
    if len(numbers) != len(set(numbers)):
        problems.append("some questions have two answers")
    return problems


def booklet_problems(booklet: ParsedBooklet, edition: Edition, key: pl.DataFrame) -> dict[str, list[str]]:
    """Blocking problems of a parsed booklet, per check name (empty lists mean the check passes)."""
    questions = booklet.questions
    numbers = {q.number for q in questions}
    keyed = set(key["number"].to_list()) if not key.is_empty() else set()
    return {
        "questions_numbered_1_to_80": exam_validation.numbering_problems(questions, edition.question_count),
        "no_empty_fields": exam_validation.empty_fields(questions),
        "no_header_footer_text": exam_validation.header_footer_leaks(questions),
        "no_swallowed_choices": exam_validation.swallowed_choices(questions),
        "booklet_edition_matches": edition_mismatch(booklet.edition_in_header, edition.edition),
        "status_from_answer_key": (
            [f"no answer-key row for questions {sorted(numbers - keyed)}"] if numbers - keyed else []
        )
        if not key.is_empty()
        else [f"edition {edition.edition} has no answer key yet: materialize answer_keys first"],
    }


def area_warnings(questions: pl.DataFrame) -> list[str]:
    """Area sanity (a warning): e.g. the Ética range should mention OAB or advogad*."""
    text = pl.concat_str(["stem", "choice_a", "choice_b", "choice_c", "choice_d"], separator="\n")
    rows = questions.select("number", "area", text.alias("text")).iter_rows()
    return exam_validation.area_sanity(list(rows))

"""The exam checks, grouped by the asset check they report to. Each returns human-readable problems."""

from __future__ import annotations

import polars as pl

from oabench_pipeline.core import exam_validation
from oabench_pipeline.core.editions import Edition
from oabench_pipeline.core.records import KeyStatus, ParsedAnswerKey, ParsedBooklet
from oabench_pipeline.core.tables import column_names


def edition_mismatch(found: int | None, expected: int) -> list[str]:
    """A 45th booklet pinned as the 44th is caught by the edition printed in the running header."""
    if found is None:
        return [f"no edition number found in the header (expected {expected})"]
    return [] if found == expected else [f"header says edition {found}, registry says {expected}"]


def key_status_mismatch(in_title: KeyStatus | None, registry: KeyStatus) -> list[str]:
    """A preliminary key pinned as definitive (or the reverse) is caught by the key's own title."""
    if in_title is None or in_title == registry:
        return []
    return [f"the key calls itself {in_title} (its title), the registry says key_status = {registry!r}"]


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
    return {
        "questions_numbered_1_to_80": exam_validation.numbering_problems(questions, edition.question_count),
        "no_empty_fields": exam_validation.empty_fields(questions),
        "no_header_footer_text": exam_validation.header_footer_leaks(questions),
        "no_swallowed_choices": exam_validation.swallowed_choices(questions),
        "booklet_edition_matches": edition_mismatch(booklet.edition_in_header, edition.edition),
        "status_from_answer_key": _key_rows_problems(edition, numbers, key),
    }


def _key_rows_problems(edition: Edition, numbers: set[int], key: pl.DataFrame) -> list[str]:
    if key.is_empty():
        return [f"edition {edition.edition} has no answer key yet: materialize answer_keys first"]
    if "status_source" not in key.columns:
        return [
            f"edition {edition.edition}'s answer_keys rows predate status_source: materialize answer_keys"
        ]
    keyed = set(key["number"].to_list())
    return [f"no answer-key row for questions {sorted(numbers - keyed)}"] if numbers - keyed else []


def area_warnings(questions: pl.DataFrame) -> list[str]:
    """Area sanity (a warning): e.g. the Ética range should mention OAB or advogad*."""
    text = pl.concat_str(["stem", "choice_a", "choice_b", "choice_c", "choice_d"], separator="\n")
    rows = questions.select("number", "area", text.alias("text")).iter_rows()
    return exam_validation.area_sanity(list(rows))


def registry_drift(edition: Edition, answer_keys: pl.DataFrame, questions: pl.DataFrame) -> list[str]:
    """What the stored exam tables say that the registry no longer does (empty: they agree).

    The parsed tables carry facts of the registry beside those of the PDFs: the area of each number, the
    exam date, the key's status and the annulments the key does not show. Editing them in the registry
    (a corrected boundary, an annulment learnt later) must re-ingest the edition, as must tables written
    before a column existed; the PDFs' own content is covered by their pins.
    """
    drift = [
        f"{table} has no column {name}"
        for table, frame in (("answer_keys", answer_keys), ("questions", questions))
        for name in column_names(table)
        if name not in frame.columns
    ]
    if drift:
        return drift
    for table, frame in (("answer_keys", answer_keys), ("questions", questions)):
        if frame["exam_date"].ne(edition.exam_date).any() or frame["key_status"].ne(edition.key_status).any():
            drift.append(f"{table}: exam_date or key_status differ from the registry")
        unresolved = set(frame.filter(pl.col("status") == "unresolved")["number"])
        if unresolved != set(edition.unresolved):
            drift.append(f"{table}: unresolved questions differ from the registry's `unresolved`")
        by_registry = frame.filter(
            pl.col("status_source").str.starts_with("registry") & (pl.col("status") == "annulled")
        )
        if set(by_registry["status_source"]) - {edition.annulled_status_source} or not set(
            by_registry["number"]
        ) <= set(edition.annulled):
            drift.append(f"{table}: annulments from the registry differ from its `annulled`")
        if frame.filter(
            pl.col("number").is_in(list(edition.annulled)) & (pl.col("status") != "annulled")
        ).height:
            drift.append(f"{table}: a question the registry annuls is active")
    areas = [edition.area_of(n) for n in questions["number"]]
    if areas != questions["area"].to_list():
        drift.append("questions: areas differ from the registry's area scheme")
    return drift

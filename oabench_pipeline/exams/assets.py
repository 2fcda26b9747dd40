"""Exam assets: official PDFs → answer keys → questions, one partition per edition.

Each asset validates what it read before writing anything: a blocking problem fails the step with a
message naming the edition and what is wrong, and the partition keeps its last good rows.
"""

from collections.abc import Iterator

import polars as pl
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    DataVersion,
    Failure,
    MaterializeResult,
    MetadataValue,
    asset,
)

from oabench_pipeline.core.editions import Edition, FileKind, key_provenance
from oabench_pipeline.core.records import ParsedAnswerKey, ParsedBooklet, make_qid
from oabench_pipeline.core.versions import ANSWER_KEY_PARSER_VERSION, BOOKLET_PARSER_VERSION, frame_version
from oabench_pipeline.exams import validation
from oabench_pipeline.exams.downloads import DownloadError
from oabench_pipeline.exams.resources import ExamSourcesResource
from oabench_pipeline.shared.checks import check_specs, problems_result, stop_on_blocking_failures
from oabench_pipeline.shared.metadata import markdown_preview, table_schema
from oabench_pipeline.shared.partitions import editions_partitions
from oabench_pipeline.shared.resources import WarehouseResource

FILE_KINDS: tuple[FileKind, ...] = ("booklet", "answer_key")

EXAM_PDF_CHECKS = {
    "stored_files_match_pins": "Both stored PDFs (booklet and answer key) hash to the SHA-256 pinned in the "
    "editions registry; blocking: a mismatch writes nothing.",
}


@asset(group_name="sources", metadata={"dagster/column_schema": table_schema("editions").value})
def editions(exam_sources: ExamSourcesResource, warehouse: WarehouseResource) -> MaterializeResult:
    """Every edition in the editions registry: dates, portal pages, URLs and pinned SHA-256, question count,
    the answer key's status (definitive or preliminary) and the annulments the registry adds to it."""
    known = list(exam_sources.editions().values())
    frame = pl.DataFrame(
        [_edition_row(e) for e in known],
        schema_overrides={
            "annulled": pl.List(pl.Int32),
            "unresolved": pl.List(pl.Int32),
            "exam_page_url": pl.String,
            "booklet_official_url": pl.String,
            "answer_key_official_url": pl.String,
        },
    )
    warehouse.warehouse().write_partition("editions", frame)
    return MaterializeResult(
        metadata={
            "rows": len(frame),
            "editions": MetadataValue.text(", ".join(e.partition_key for e in known)),
        },
        data_version=DataVersion(frame_version(frame)),
    )


def _edition_row(edition: Edition) -> dict:
    return {
        "edition": edition.edition,
        "exam_name": edition.exam_name,
        "exam_date": edition.exam_date,
        "exam_page_url": edition.exam_page_url,
        "booklet_url": edition.booklet.url,
        "booklet_sha256": edition.booklet.sha256,
        "answer_key_url": edition.answer_key.url,
        "answer_key_sha256": edition.answer_key.sha256,
        "area_scheme": edition.area_scheme,
        "pinned_by": edition.pinned_by,
        "exam_label": edition.exam_label,
        "question_count": edition.question_count,
        "key_status": edition.key_status,
        "annulled": list(edition.annulled),
        "annulled_source": edition.annulled_source,
        "booklet_official_url": edition.booklet.official_url,
        "answer_key_official_url": edition.answer_key.official_url,
        "unresolved": sorted(edition.unresolved),
    }


@asset(
    group_name="sources",
    partitions_def=editions_partitions,
    metadata={"dagster/column_schema": table_schema("source_files").value},
    check_specs=check_specs("exam_pdfs", EXAM_PDF_CHECKS, blocking=EXAM_PDF_CHECKS),
)
def exam_pdfs(
    context: AssetExecutionContext, exam_sources: ExamSourcesResource, warehouse: WarehouseResource
) -> Iterator[MaterializeResult | AssetCheckResult]:
    """The edition's booklet (Caderno de Prova - Tipo 1) and answer key PDFs (definitive, or preliminary where
    only that is archived).

    Downloaded with httpx (streamed, with timeouts and bounded retries), verified against the SHA-256
    pinned in the registry and kept in the content-addressed raw store; a verified stored copy is reused
    with no network request.
    """
    edition = exam_sources.edition(context.partition_key)
    store = warehouse.raw_store()
    downloader = exam_sources.downloader(store)
    try:
        fetched = [downloader.fetch(edition, kind) for kind in FILE_KINDS]
    except DownloadError as error:
        raise Failure(description=str(error)) from None
    unverified = [f"{f.kind} sha256 {f.sha256}" for f in fetched if store.verified_path(f.sha256) is None]
    pins = [problems_result("stored_files_match_pins", unverified)]
    yield from stop_on_blocking_failures(pins, EXAM_PDF_CHECKS, f"edition {edition.edition} PDFs")
    frame = pl.DataFrame(
        [
            {
                "edition": f.edition,
                "kind": f.kind,
                "url": f.url,
                "fetched_from": f.source_url,
                "sha256": f.sha256,
                "bytes": f.size,
                "stored_at": str(f.path),
                "official_url": edition.file(f.kind).official_url,
            }
            for f in fetched
        ],
        schema_overrides={"official_url": pl.String},
    )
    warehouse.warehouse().write_partition("source_files", frame, context.partition_key)
    for f in fetched:
        context.log.info(
            f"edition {f.edition} {f.kind}: {'downloaded' if f.downloaded else 'reused stored copy'} "
            f"{f.size} bytes, sha256 {f.sha256}"
        )
    yield MaterializeResult(
        metadata={
            "booklet_sha256": fetched[0].sha256,
            "answer_key_sha256": fetched[1].sha256,
            "downloaded": sum(f.downloaded for f in fetched),
            "reused": sum(not f.downloaded for f in fetched),
            "bytes": sum(f.size for f in fetched),
        },
        check_results=pins,
        # The SHA-256 pins are the content: a re-download of the same files is the same version.
        data_version=DataVersion(" ".join(f"{f.kind}:{f.sha256}" for f in fetched)),
    )


def _read_stored(store_owner: WarehouseResource, edition: Edition, kind: FileKind) -> bytes:
    pinned = edition.file(kind)
    path = store_owner.raw_store().verified_path(pinned.sha256)
    if path is None:
        raise Failure(
            description=f"edition {edition.edition} {kind}: no verified copy of sha256 {pinned.sha256} in the "
            f"raw store; materialize exam_pdfs for partition {edition.partition_key} first"
        )
    return path.read_bytes()


ANSWER_KEY_CHECKS = {
    "answer_key_covers_every_question": "The TIPO 1 key gives exactly one answer (a letter or `*`, annulled) "
    "to each of the edition's questions, none outside 1–question_count (80; 100 in the 1st–3rd); blocking.",
    "answer_key_edition_matches": "The edition printed in the key's header is the partition's edition "
    "(a 45th key pinned as the 44th is refused); blocking.",
    "answer_key_status_matches": "What the key calls itself (GABARITOS DEFINITIVOS / PRELIMINARES) is the "
    "registry's key_status (a preliminary key pinned as definitive is refused); blocking.",
}


@asset(
    group_name="exams",
    partitions_def=editions_partitions,
    deps=[exam_pdfs],
    code_version=ANSWER_KEY_PARSER_VERSION,
    metadata={"dagster/column_schema": table_schema("answer_keys").value},
    check_specs=check_specs("answer_keys", ANSWER_KEY_CHECKS, blocking=ANSWER_KEY_CHECKS),
)
def answer_keys(
    context: AssetExecutionContext, exam_sources: ExamSourcesResource, warehouse: WarehouseResource
) -> Iterator[MaterializeResult | AssetCheckResult]:
    """The answer key for booklet TIPO 1: the correct letter per question, or annulled.

    Read from the pinned key (definitive, or preliminary where only that is archived; every layout since
    2010, `core/answer_key.py`); a question the registry lists as annulled after a preliminary key is
    annulled too, and `status_source` says which of the two said so.
    """
    # Imported here: pymupdf (and the layout models its import loads) costs ~0.5 s that every process
    # loading these definitions would pay, while only a step parsing a PDF needs it.
    from oabench_pipeline.core.answer_key import AnswerKeyParseError, parse_answer_key

    edition = exam_sources.edition(context.partition_key)
    try:
        key = parse_answer_key(
            _read_stored(warehouse, edition, "answer_key"),
            booklet_type=1,
            expected_questions=edition.question_count,
        )
    except AnswerKeyParseError as error:
        raise Failure(
            description=f"edition {edition.edition} answer key ({edition.answer_key.url}): {error}"
        ) from None
    problems = {
        "answer_key_covers_every_question": validation.answer_key_coverage(key, edition.question_count),
        "answer_key_edition_matches": validation.edition_mismatch(key.edition_in_header, edition.edition),
        "answer_key_status_matches": validation.key_status_mismatch(key.status_in_title, edition.key_status),
    }
    results = [problems_result(name, found) for name, found in problems.items()]
    yield from stop_on_blocking_failures(
        results, ANSWER_KEY_CHECKS, f"edition {edition.edition} answer key ({edition.answer_key.url})"
    )
    frame = answer_key_frame(edition, key)
    version = frame_version(frame)  # the rows, which carry the PDF's SHA-256 pin
    warehouse.warehouse().write_partition("answer_keys", frame, context.partition_key, data_version=version)
    annulled = frame.filter(pl.col("status") == "annulled")
    yield MaterializeResult(
        metadata={
            "rows": len(frame),
            "annulled": MetadataValue.text(
                ", ".join(
                    f"{n} ({source})" for n, source in annulled.select("number", "status_source").rows()
                )
                or "none"
            ),
            "key_status": edition.key_status,
            "key_layout": MetadataValue.text(f"{key.shape}: {key.table_heading}"),
            "letter_counts": MetadataValue.json(frame["correct"].value_counts().to_dicts()),
            "source_sha256": edition.answer_key.sha256,
        },
        check_results=results,
        data_version=DataVersion(version),
    )


def answer_key_frame(edition: Edition, key: ParsedAnswerKey) -> pl.DataFrame:
    """One row per question: the key's letter, unless the key or the registry annuls the question or the
    registry holds it unresolved; and where the answer comes from (`core/records.py: key_provenance`)."""
    rows = []
    for entry in key.entries:
        provenance = key_provenance(edition, entry)
        rows.append(
            {
                "qid": make_qid(edition.edition, entry.number),
                "edition": edition.edition,
                "number": entry.number,
                "correct": provenance.correct,
                "status": provenance.status,
                "source_sha256": edition.answer_key.sha256,
                "exam_date": edition.exam_date,
                "key_status": edition.key_status,
                "status_source": provenance.status_source,
                "key_document": provenance.key_document,
                "changed_after_preliminary": provenance.changed_after_preliminary,
                "preliminary_correct": provenance.preliminary_correct,
                "status_note": provenance.status_note,
            }
        )
    return pl.DataFrame(
        rows,
        schema_overrides={
            "correct": pl.String,
            "changed_after_preliminary": pl.Boolean,
            "preliminary_correct": pl.String,
            "status_note": pl.String,
        },
    )


QUESTION_CHECKS = {
    "questions_numbered_1_to_80": "The booklet yields questions 1–question_count (80; 100 in the 1st–3rd "
    "editions), each once, in order; blocking.",
    "no_empty_fields": "Every question has a non-empty stem and four non-empty choices A–D; blocking.",
    "no_header_footer_text": "No running header or footer (edition banner, page number) leaked into a "
    "stem or choice; blocking.",
    "no_swallowed_choices": "No choice contains the start of another choice or of the next question; blocking.",
    "booklet_edition_matches": "The edition printed in the booklet's running header is the partition's "
    "edition; blocking.",
    "status_from_answer_key": "Every question has a row in the edition's answer key, which gives its status "
    "(active or annulled); blocking.",
    "area_sanity": "Warning only: each legal area's range mentions that area's keywords (e.g. Ética: OAB, "
    "advogado).",
}
BLOCKING_QUESTION_CHECKS = [name for name in QUESTION_CHECKS if name != "area_sanity"]


@asset(
    group_name="exams",
    partitions_def=editions_partitions,
    deps=[exam_pdfs, answer_keys],
    code_version=BOOKLET_PARSER_VERSION,
    metadata={"dagster/column_schema": table_schema("questions").value},
    check_specs=check_specs("questions", QUESTION_CHECKS, blocking=BLOCKING_QUESTION_CHECKS),
)
def questions(
    context: AssetExecutionContext, exam_sources: ExamSourcesResource, warehouse: WarehouseResource
) -> Iterator[MaterializeResult | AssetCheckResult]:
    """The edition's questions (80; 100 in the 1st–3rd): stem and choices A–D in reading order, legal area,
    status, pages.

    Parsed from the booklet PDF with pymupdf across both columns and page breaks, without running
    headers and footers; `status` (and its `status_source`) comes from the answer_keys partition, `area`
    from the edition's area scheme in the registry.
    """
    from oabench_pipeline.core.booklet import BookletParseError, parse_booklet  # pymupdf: see answer_keys

    edition = exam_sources.edition(context.partition_key)
    try:
        booklet = parse_booklet(
            _read_stored(warehouse, edition, "booklet"), question_count=edition.question_count
        )
    except BookletParseError as error:
        raise Failure(
            description=f"edition {edition.edition} booklet ({edition.booklet.url}): {error}"
        ) from None
    # The answer keys' version first: the rows read after it are at least as new as what it records.
    inputs = warehouse.warehouse().input_versions({"answer_keys": context.partition_key})
    key = warehouse.warehouse().read("answer_keys", context.partition_key)
    problems = validation.booklet_problems(booklet, edition, key)
    results = [problems_result(name, found) for name, found in problems.items()]
    yield from stop_on_blocking_failures(
        results, BLOCKING_QUESTION_CHECKS, f"edition {edition.edition} booklet ({edition.booklet.url})"
    )
    frame = questions_frame(edition, booklet, key)
    warnings = validation.area_warnings(frame)
    version = frame_version(frame)  # the rows, which carry the booklet's SHA-256 pin
    warehouse.warehouse().write_partition(
        "questions", frame, context.partition_key, data_version=version, inputs=inputs
    )
    yield MaterializeResult(
        metadata={
            "rows": len(frame),
            "active": frame.filter(pl.col("status") == "active").height,
            "annulled": frame.filter(pl.col("status") == "annulled").height,
            "requires_image": int(frame["requires_image"].sum()),
            "source_sha256": edition.booklet.sha256,
            "preview": markdown_preview(frame, ["qid", "area", "stem", "choice_a", "status"]),
        },
        check_results=[
            *results,
            AssetCheckResult(
                check_name="area_sanity",
                passed=not warnings,
                severity=AssetCheckSeverity.WARN,
                metadata={"warnings": MetadataValue.md("\n".join(f"- {w}" for w in warnings) or "none")},
            ),
        ],
        data_version=DataVersion(version),
    )


def questions_frame(edition: Edition, booklet: ParsedBooklet, key: pl.DataFrame) -> pl.DataFrame:
    status = dict(zip(key["number"].to_list(), key["status"].to_list(), strict=True))
    status_source = dict(zip(key["number"].to_list(), key["status_source"].to_list(), strict=True))
    return pl.DataFrame(
        [
            {
                "qid": make_qid(edition.edition, q.number),
                "edition": edition.edition,
                "number": q.number,
                "area": edition.area_of(q.number),
                "stem": q.stem,
                "choice_a": q.choice_a,
                "choice_b": q.choice_b,
                "choice_c": q.choice_c,
                "choice_d": q.choice_d,
                "status": status[q.number],
                "requires_image": q.requires_image,
                "pages": q.pages,
                "source_sha256": edition.booklet.sha256,
                "exam_date": edition.exam_date,
                "key_status": edition.key_status,
                "status_source": status_source[q.number],
            }
            for q in booklet.questions
        ]
    )

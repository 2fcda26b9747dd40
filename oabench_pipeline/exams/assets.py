"""Exam assets: official PDFs → answer keys → questions, one partition per edition.

Each asset validates what it read before writing anything: a blocking problem fails the step with a
message naming the edition and what is wrong, and the partition keeps its last good rows.
"""

import polars as pl
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    Failure,
    MaterializeResult,
    MetadataValue,
    asset,
)

from oabench_pipeline.core.answer_key import AnswerKeyParseError, parse_answer_key
from oabench_pipeline.core.booklet import BookletParseError, parse_booklet
from oabench_pipeline.core.editions import Edition, FileKind
from oabench_pipeline.core.records import ParsedAnswerKey, ParsedBooklet, make_qid
from oabench_pipeline.exams import validation
from oabench_pipeline.exams.downloads import DownloadError
from oabench_pipeline.metadata import markdown_preview, table_schema
from oabench_pipeline.partitions import editions_partitions
from oabench_pipeline.resources import ExamSourcesResource, WarehouseResource

FILE_KINDS: tuple[FileKind, ...] = ("booklet", "answer_key")


@asset(group_name="sources", metadata={"dagster/column_schema": table_schema("editions").value})
def editions(exam_sources: ExamSourcesResource, warehouse: WarehouseResource) -> MaterializeResult:
    """Every edition in the editions registry: dates, portal pages, official URLs and pinned SHA-256."""
    known = list(exam_sources.editions().values())
    frame = pl.DataFrame([_edition_row(e) for e in known])
    warehouse.warehouse().write_partition("editions", frame)
    return MaterializeResult(
        metadata={
            "rows": len(frame),
            "editions": MetadataValue.text(", ".join(e.partition_key for e in known)),
        }
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
    }


@asset(
    group_name="sources",
    partitions_def=editions_partitions,
    metadata={"dagster/column_schema": table_schema("source_files").value},
    check_specs=[AssetCheckSpec("stored_files_match_pins", asset="exam_pdfs", blocking=True)],
)
def exam_pdfs(
    context: AssetExecutionContext, exam_sources: ExamSourcesResource, warehouse: WarehouseResource
) -> MaterializeResult:
    """The edition's official booklet (Caderno de Prova - Tipo 1) and definitive answer key PDFs.

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
            }
            for f in fetched
        ]
    )
    warehouse.warehouse().write_partition("source_files", frame, context.partition_key)
    for f in fetched:
        context.log.info(
            f"edition {f.edition} {f.kind}: {'downloaded' if f.downloaded else 'reused stored copy'} "
            f"{f.size} bytes, sha256 {f.sha256}"
        )
    unverified = [f for f in fetched if store.verified_path(f.sha256) is None]
    return MaterializeResult(
        metadata={
            "booklet_sha256": fetched[0].sha256,
            "answer_key_sha256": fetched[1].sha256,
            "downloaded": sum(f.downloaded for f in fetched),
            "reused": sum(not f.downloaded for f in fetched),
            "bytes": sum(f.size for f in fetched),
        },
        check_results=[
            AssetCheckResult(
                check_name="stored_files_match_pins",
                passed=not unverified,
                metadata={"files": len(fetched), "mismatched": len(unverified)},
            )
        ],
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


ANSWER_KEY_CHECKS = ["answer_key_covers_every_question", "answer_key_edition_matches"]


@asset(
    group_name="exams",
    partitions_def=editions_partitions,
    deps=[exam_pdfs],
    metadata={"dagster/column_schema": table_schema("answer_keys").value},
    check_specs=[AssetCheckSpec(name, asset="answer_keys", blocking=True) for name in ANSWER_KEY_CHECKS],
)
def answer_keys(
    context: AssetExecutionContext, exam_sources: ExamSourcesResource, warehouse: WarehouseResource
) -> MaterializeResult:
    """The definitive answer key for booklet TIPO 1: the correct letter per question, `*` = annulled."""
    edition = exam_sources.edition(context.partition_key)
    try:
        key = parse_answer_key(_read_stored(warehouse, edition, "answer_key"), booklet_type=1)
    except AnswerKeyParseError as error:
        raise Failure(
            description=f"edition {edition.edition} answer key ({edition.answer_key.url}): {error}"
        ) from None
    problems = {
        "answer_key_covers_every_question": validation.answer_key_coverage(key, edition.question_count),
        "answer_key_edition_matches": validation.edition_mismatch(key.edition_in_header, edition.edition),
    }
    _fail_on_blocking(edition, f"answer key ({edition.answer_key.url})", problems)
    frame = answer_key_frame(edition, key)
    warehouse.warehouse().write_partition("answer_keys", frame, context.partition_key)
    annulled = frame.filter(pl.col("status") == "annulled")["number"].to_list()
    return MaterializeResult(
        metadata={
            "rows": len(frame),
            "annulled": MetadataValue.text(", ".join(map(str, annulled)) or "none"),
            "letter_counts": MetadataValue.json(frame["correct"].value_counts().to_dicts()),
            "source_sha256": edition.answer_key.sha256,
        },
        check_results=_passed(problems),
    )


def answer_key_frame(edition: Edition, key: ParsedAnswerKey) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "qid": make_qid(edition.edition, entry.number),
                "edition": edition.edition,
                "number": entry.number,
                "correct": entry.correct,
                "status": entry.status,
                "source_sha256": edition.answer_key.sha256,
            }
            for entry in key.entries
        ],
        schema_overrides={"correct": pl.String},
    )


QUESTION_CHECKS = [
    "questions_numbered_1_to_80",
    "no_empty_fields",
    "no_header_footer_text",
    "no_swallowed_choices",
    "booklet_edition_matches",
    "status_from_answer_key",
]


@asset(
    group_name="exams",
    partitions_def=editions_partitions,
    deps=[exam_pdfs, answer_keys],
    metadata={"dagster/column_schema": table_schema("questions").value},
    check_specs=[
        *(AssetCheckSpec(name, asset="questions", blocking=True) for name in QUESTION_CHECKS),
        AssetCheckSpec("area_sanity", asset="questions", description="Area keywords appear where expected"),
    ],
)
def questions(
    context: AssetExecutionContext, exam_sources: ExamSourcesResource, warehouse: WarehouseResource
) -> MaterializeResult:
    """The 80 questions of the edition: stem and choices A–D in reading order, legal area, status, pages.

    Parsed from the booklet PDF with pymupdf across both columns and page breaks, without running
    headers and footers; `status` comes from the answer key, `area` from the edition's area table.
    """
    edition = exam_sources.edition(context.partition_key)
    try:
        booklet = parse_booklet(_read_stored(warehouse, edition, "booklet"))
    except BookletParseError as error:
        raise Failure(
            description=f"edition {edition.edition} booklet ({edition.booklet.url}): {error}"
        ) from None
    key = warehouse.warehouse().read("answer_keys", context.partition_key)
    problems = validation.booklet_problems(booklet, edition, key)
    _fail_on_blocking(edition, f"booklet ({edition.booklet.url})", problems)
    frame = questions_frame(edition, booklet, key)
    warnings = validation.area_warnings(frame)
    warehouse.warehouse().write_partition("questions", frame, context.partition_key)
    return MaterializeResult(
        metadata={
            "rows": len(frame),
            "active": frame.filter(pl.col("status") == "active").height,
            "annulled": frame.filter(pl.col("status") == "annulled").height,
            "requires_image": int(frame["requires_image"].sum()),
            "source_sha256": edition.booklet.sha256,
            "preview": markdown_preview(frame, ["qid", "area", "stem", "choice_a", "status"]),
        },
        check_results=[
            *_passed(problems),
            AssetCheckResult(
                check_name="area_sanity",
                passed=not warnings,
                severity=AssetCheckSeverity.WARN,
                metadata={"warnings": MetadataValue.md("\n".join(f"- {w}" for w in warnings) or "none")},
            ),
        ],
    )


def questions_frame(edition: Edition, booklet: ParsedBooklet, key: pl.DataFrame) -> pl.DataFrame:
    status = dict(zip(key["number"].to_list(), key["status"].to_list(), strict=True))
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
            }
            for q in booklet.questions
        ]
    )


def _fail_on_blocking(edition: Edition, what: str, problems: dict[str, list[str]]) -> None:
    failing = {name: found for name, found in problems.items() if found}
    if not failing:
        return
    lines = [
        f"edition {edition.edition} {what}: {len(failing)} blocking check(s) failed, nothing was written:"
    ]
    for name, found in failing.items():
        lines.append(
            f"- {name}: " + "; ".join(found[:10]) + (f" (+{len(found) - 10} more)" if len(found) > 10 else "")
        )
    raise Failure(description="\n".join(lines), metadata={"failed_checks": ", ".join(failing)})


def _passed(problems: dict[str, list[str]]) -> list[AssetCheckResult]:
    return [AssetCheckResult(check_name=name, passed=True) for name in problems]

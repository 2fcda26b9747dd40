"""Phase-2 exam assets: OAB-Bench's pinned files → items, answer standards (per edition) and judge prompts.

Each asset parses the verified stored file and checks what it read before writing anything: a blocking
failure fails the step naming the item and what is wrong, and the partition keeps its last good rows.
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

from oabench_pipeline.core.phase2.items import (
    Phase2DataError,
    Phase2Item,
    SubItemStandard,
    area_exam_problems,
    criteria_total_problems,
    criterion_problems,
    parse_items,
    parse_standards,
)
from oabench_pipeline.core.phase2.judge_prompts import parse_judge_prompts
from oabench_pipeline.core.phase2.sources import PHASE2_FILE_KINDS, Phase2FileKind, Phase2Sources
from oabench_pipeline.core.versions import PHASE2_PARSER_VERSION, frame_version
from oabench_pipeline.exams.downloads import DownloadError
from oabench_pipeline.phase2.resources import Phase2SourcesResource
from oabench_pipeline.shared.checks import check_specs, problems_result, stop_on_blocking_failures
from oabench_pipeline.shared.metadata import markdown_preview, table_schema
from oabench_pipeline.shared.partitions import phase2_editions_partitions
from oabench_pipeline.shared.resources import WarehouseResource

AREAS_PER_EDITION = 7
ITEMS_PER_AREA_EXAM = 5

SOURCE_CHECKS = {
    "stored_files_match_pins": "The three stored files (items, standards, judge prompts) hash to the SHA-256 "
    "pinned in registry/phase2.toml; blocking: a mismatch writes nothing.",
}


@asset(
    group_name="phase2_sources",
    metadata={"dagster/column_schema": table_schema("phase2_source_files").value},
    check_specs=check_specs("phase2_source_files", SOURCE_CHECKS, blocking=SOURCE_CHECKS),
)
def phase2_source_files(
    context: AssetExecutionContext, phase2_sources: Phase2SourcesResource, warehouse: WarehouseResource
) -> Iterator[MaterializeResult | AssetCheckResult]:
    """OAB-Bench's item, answer-standard and judge-prompt files at the commit `registry/phase2.toml` pins.

    Downloaded as the official PDFs are (httpx, bounded retries, `OABENCH_SOURCE_BASE_URL` replacing scheme
    and host, a local mirror folder works too), verified against their SHA-256 and kept in the raw store; a
    verified stored copy is reused with no request. A file whose bytes differ from its pin is refused.
    """
    sources = phase2_sources.sources()
    store = warehouse.raw_store()
    downloader = phase2_sources.downloader(store)
    rows: list[dict] = []
    try:
        for kind in PHASE2_FILE_KINDS:
            pinned = sources.file(kind)
            got = downloader.fetch_pinned(pinned.pinned(kind), f"phase 2 {kind} ({pinned.url})")
            context.log.info(
                f"phase 2 {kind}: {'downloaded' if got.downloaded else 'reused stored copy'} {got.size} bytes"
            )
            rows.append(
                {
                    "kind": kind,
                    "path": pinned.path,
                    "url": got.url,
                    "fetched_from": got.source_url,
                    "sha256": got.sha256,
                    "bytes": got.size,
                    "stored_at": str(got.path),
                    "commit": sources.source.commit,
                    "downloaded": got.downloaded,
                }
            )
    except DownloadError as error:
        raise Failure(description=str(error)) from None
    unverified = [
        f"{r['kind']} sha256 {r['sha256']}" for r in rows if store.verified_path(r["sha256"]) is None
    ]
    pins = [problems_result("stored_files_match_pins", unverified)]
    yield from stop_on_blocking_failures(pins, SOURCE_CHECKS, "phase 2 source files")
    frame = pl.DataFrame(rows).drop("downloaded")
    warehouse.warehouse().write_partition("phase2_source_files", frame)
    yield MaterializeResult(
        metadata={
            "commit": sources.source.commit,
            "downloaded": sum(r["downloaded"] for r in rows),
            "reused": sum(not r["downloaded"] for r in rows),
            "bytes": sum(r["bytes"] for r in rows),
        },
        check_results=pins,
        data_version=DataVersion(" ".join(f"{r['kind']}:{r['sha256']}" for r in rows)),
    )


def stored_text(warehouse: WarehouseResource, sources: Phase2Sources, kind: Phase2FileKind) -> str:
    """The verified stored bytes of one pinned file, as text; a missing copy fails the step saying what to run."""
    pinned = sources.file(kind)
    path = warehouse.raw_store().verified_path(pinned.sha256)
    if path is None:
        raise Failure(
            description=f"phase 2 {kind}: no verified copy of sha256 {pinned.sha256} in the raw store; "
            "run `oabench ingest --phase 2` (materializes phase2_source_files) first"
        )
    return path.read_text(encoding="utf-8")


def read_items(warehouse: WarehouseResource, sources: Phase2Sources) -> list[Phase2Item]:
    try:
        return parse_items(stored_text(warehouse, sources, "questions"), sources.file("questions").url)
    except Phase2DataError as error:
        raise Failure(description=f"phase 2 items: {error}") from None


def _source_columns(sources: Phase2Sources, kind: Phase2FileKind) -> dict[str, str]:
    pinned = sources.file(kind)
    return {"source_url": pinned.url, "source_sha256": pinned.sha256}


def items_frame(items: list[Phase2Item], sources: Phase2Sources) -> pl.DataFrame:
    """One row per item (`phase2_items`)."""
    source = _source_columns(sources, "questions")
    return pl.DataFrame(
        [
            {
                "item_id": i.item_id,
                "edition": i.edition,
                "area": i.area,
                "kind": i.kind,
                "number": i.number,
                "statement": i.statement,
                "system": i.system,
                "turn_prompts": list(i.turn_prompts),
                "turn_points": list(i.turn_points),
                "max_points": i.max_points,
                **source,
            }
            for i in items
        ],
        schema_overrides={
            "number": pl.Int32,
            "turn_prompts": pl.List(pl.String),
            "turn_points": pl.List(pl.Float64),
        },
    )


def standards_frame(standards: list[SubItemStandard], sources: Phase2Sources) -> pl.DataFrame:
    """One row per sub-item (`phase2_standards`), its criteria as a list of structs."""
    source = _source_columns(sources, "standards")
    return pl.DataFrame(
        [
            {
                "item_id": s.item_id,
                "edition": s.edition,
                "area": s.area,
                "turn": s.turn,
                "standard": s.standard,
                "points": s.points,
                "criteria": [
                    {"text": c.text, "max_points": c.max_points, "allowed": list(c.allowed)}
                    for c in s.criteria
                ],
                "annulled": s.annulled,
                **source,
            }
            for s in standards
        ],
        schema_overrides={
            "criteria": pl.List(
                pl.Struct({"text": pl.String, "max_points": pl.Float64, "allowed": pl.List(pl.Float64)})
            )
        },
    )


ITEM_CHECKS = {
    "area_exams_complete": f"The edition has {AREAS_PER_EDITION} area-exams of {ITEMS_PER_AREA_EXAM} items "
    "each (105 items in 21 area-exams over the 39th-41st); blocking.",
    "area_exam_points_sum_to_10": "Each area-exam is one piece of 5.00 points and questions 1-4 of 1.25, "
    "10.00 in all; blocking.",
}


def _edition_items(items: list[Phase2Item], edition: str) -> list[Phase2Item]:
    return [i for i in items if str(i.edition) == edition]


def _count_problems(items: list[Phase2Item], edition: str) -> list[str]:
    exams: dict[str, int] = {}
    for item in items:
        exams[item.area] = exams.get(item.area, 0) + 1
    problems = [
        f"{edition}_{area}: {n} items, not {ITEMS_PER_AREA_EXAM}"
        for area, n in sorted(exams.items())
        if n != ITEMS_PER_AREA_EXAM
    ]
    if len(exams) != AREAS_PER_EDITION:
        problems.insert(0, f"edition {edition}: {len(exams)} area-exams, not {AREAS_PER_EDITION}")
    return problems


@asset(
    group_name="phase2_exams",
    partitions_def=phase2_editions_partitions,
    deps=[phase2_source_files],
    code_version=PHASE2_PARSER_VERSION,
    metadata={"dagster/column_schema": table_schema("phase2_items").value},
    check_specs=check_specs("phase2_items", ITEM_CHECKS, blocking=ITEM_CHECKS),
)
def phase2_items(
    context: AssetExecutionContext, phase2_sources: Phase2SourcesResource, warehouse: WarehouseResource
) -> Iterator[MaterializeResult | AssetCheckResult]:
    """The edition's 2nd-phase items (OAB-Bench's `question.jsonl`): per area of law one procedural piece
    (5.00 points, one turn) and four discursive questions (sub-items A and B, 1.25 points together), with the
    statement, the `system` instruction a candidate gets, each sub-item's prompt and points."""
    sources = phase2_sources.sources()
    items = _edition_items(read_items(warehouse, sources), context.partition_key)
    problems = {
        "area_exams_complete": _count_problems(items, context.partition_key),
        "area_exam_points_sum_to_10": area_exam_problems(items),
    }
    results = [problems_result(name, found) for name, found in problems.items()]
    yield from stop_on_blocking_failures(
        results, ITEM_CHECKS, f"phase 2 edition {context.partition_key} items"
    )
    frame = items_frame(items, sources)
    warehouse.warehouse().write_partition(
        "phase2_items", frame, context.partition_key, version=PHASE2_PARSER_VERSION
    )
    yield MaterializeResult(
        metadata={
            "rows": frame.height,
            "area_exams": frame["area"].n_unique(),
            "source_sha256": sources.file("questions").sha256,
            "preview": markdown_preview(frame, ["item_id", "kind", "max_points", "statement"]),
        },
        check_results=results,
        data_version=DataVersion(frame_version(frame)),
    )


STANDARD_CHECKS = {
    "criterion_maximum_allowed": "Each criterion's maximum is one of its allowed values (the distribution "
    "table's 0,00/0,10/0,20), which increase; blocking.",
    "criteria_add_up_to_points": "Warning only: each sub-item's criteria maxima add up to the sub-item's points "
    "(OAB-Bench's own tables disagree with its items in 3 sub-items; docs/phase2.md).",
}


@asset(
    group_name="phase2_exams",
    partitions_def=phase2_editions_partitions,
    deps=[phase2_source_files, phase2_items],
    code_version=PHASE2_PARSER_VERSION,
    metadata={"dagster/column_schema": table_schema("phase2_standards").value},
    check_specs=check_specs("phase2_standards", STANDARD_CHECKS, blocking=["criterion_maximum_allowed"]),
)
def phase2_standards(
    context: AssetExecutionContext, phase2_sources: Phase2SourcesResource, warehouse: WarehouseResource
) -> Iterator[MaterializeResult | AssetCheckResult]:
    """The examiners' answer standard (padrão de resposta) of each sub-item of the edition, with the criteria
    of its distribution table ("DISTRIBUIÇÃO DOS PONTOS"): text, maximum and the values an examiner may give
    (`0,00/0,10/0,20` → [0.0, 0.1, 0.2]); heading rows (`nan`) are left out. From OAB-Bench's
    `reference_answer/guidelines.jsonl`."""
    sources = phase2_sources.sources()
    every_item = {i.item_id: i for i in read_items(warehouse, sources)}
    try:
        parsed = parse_standards(
            stored_text(warehouse, sources, "standards"), every_item, sources.file("standards").url
        )
    except Phase2DataError as error:
        raise Failure(description=f"phase 2 edition {context.partition_key} standards: {error}") from None
    standards = [s for s in parsed if str(s.edition) == context.partition_key]
    results = [problems_result("criterion_maximum_allowed", criterion_problems(standards))]
    yield from stop_on_blocking_failures(
        results, ["criterion_maximum_allowed"], f"phase 2 edition {context.partition_key} standards"
    )
    totals = criteria_total_problems(standards)
    frame = standards_frame(standards, sources)
    warehouse.warehouse().write_partition(
        "phase2_standards", frame, context.partition_key, version=PHASE2_PARSER_VERSION
    )
    yield MaterializeResult(
        metadata={
            "rows": frame.height,
            "criteria": sum(len(s.criteria) for s in standards),
            "annulled_sub_items": MetadataValue.text(
                ", ".join(f"{s.item_id} sub-item {s.turn}" for s in standards if s.annulled) or "none"
            ),
            "source_sha256": sources.file("standards").sha256,
        },
        check_results=[
            *results,
            problems_result("criteria_add_up_to_points", totals, severity=AssetCheckSeverity.WARN),
        ],
        data_version=DataVersion(frame_version(frame)),
    )


JUDGE_PROMPT_CHECKS = {
    "oab_prompts_present": "The file holds the two prompts the judging uses, single-oab-v1 and "
    "single-oab-v1-multi-turn, each with a system prompt, a template and an output format; blocking.",
}


@asset(
    group_name="phase2_exams",
    deps=[phase2_source_files],
    code_version=PHASE2_PARSER_VERSION,
    metadata={"dagster/column_schema": table_schema("phase2_judge_prompts").value},
    check_specs=check_specs("phase2_judge_prompts", JUDGE_PROMPT_CHECKS, blocking=JUDGE_PROMPT_CHECKS),
)
def phase2_judge_prompts(
    phase2_sources: Phase2SourcesResource, warehouse: WarehouseResource
) -> Iterator[MaterializeResult | AssetCheckResult]:
    """OAB-Bench's judge prompts (`data/judge_prompts.jsonl`): name, type, system prompt, template and output
    format. `single-oab-v1` grades the piece and sub-item A; `single-oab-v1-multi-turn` sub-item B."""
    sources = phase2_sources.sources()
    try:
        prompts = parse_judge_prompts(
            stored_text(warehouse, sources, "judge_prompts"), sources.file("judge_prompts").url
        )
        problems: list[str] = []
    except Phase2DataError as error:
        prompts, problems = [], [str(error)]
    results = [problems_result("oab_prompts_present", problems)]
    yield from stop_on_blocking_failures(results, JUDGE_PROMPT_CHECKS, "phase 2 judge prompts")
    source = _source_columns(sources, "judge_prompts")
    frame = pl.DataFrame(
        [{**p.__dict__, **source} for p in prompts],
        schema_overrides={"description": pl.String, "category": pl.String},
    )
    warehouse.warehouse().write_partition("phase2_judge_prompts", frame, version=PHASE2_PARSER_VERSION)
    yield MaterializeResult(
        metadata={"rows": frame.height, "prompts": MetadataValue.text(", ".join(frame["name"]))},
        check_results=results,
        data_version=DataVersion(frame_version(frame)),
    )

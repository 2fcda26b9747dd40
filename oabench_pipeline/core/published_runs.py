"""Import the run folders written by the original OABench tool, so published results enter the pipeline.

A run folder is `<run_id>/config.json` + `inferences.jsonl` (+ `scored.jsonl`, `summary.json` once
finished). Records are keyed like the models registry (`derive_model_key`), so an imported run and a
pipeline run of the same configuration land on the same partition key and can be compared or merged.
Answers are re-parsed with our `oabench-v1` parser; the recorded ones are kept beside them, so any
disagreement with the original tool stays visible instead of being overwritten.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from oabench_pipeline.core.answer_parsing import PARSER_VERSION, parse_answer
from oabench_pipeline.core.models_registry import derive_model_key, key_problem, safe_name_problem
from oabench_pipeline.core.prompts import Protocol
from oabench_pipeline.core.provenance import Provenance
from oabench_pipeline.core.records import Letter


class PublishedRunError(ValueError):
    """A run folder that cannot be read; the message names the file (and line)."""


class _RunConfig(BaseModel):
    """The part of OABench's `config.json` that decides the configuration key."""

    model_config = ConfigDict(extra="ignore")

    run_id: str = Field(alias="runId")
    model: str
    protocol: Protocol
    reasoning_effort: str | None = Field(None, alias="reasoningEffort")

    @property
    def effective_reasoning_effort(self) -> str | None:
        """OABench writes "none" (or omits the field) for no reasoning effort."""
        effort = self.reasoning_effort
        return None if effort in (None, "", "none") else effort


class _TokenUsage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    prompt_tokens: int | None = Field(None, alias="promptTokens")
    completion_tokens: int | None = Field(None, alias="completionTokens")
    reasoning_tokens: int | None = Field(None, alias="reasoningTokens")


class _RecordedAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    strict: Letter | None = None
    lenient: Letter | None = None


class _InferenceLine(BaseModel):
    """One line of OABench's `inferences.jsonl`."""

    model_config = ConfigDict(extra="ignore")

    qid: str
    edition: int
    question_number: int = Field(alias="questionNumber")
    model: str
    timestamp: datetime
    raw_response: str = Field("", alias="rawResponse")
    reasoning: str | None = None
    parsed_answer: _RecordedAnswer = Field(default_factory=_RecordedAnswer, alias="parsedAnswer")
    latency_ms: int | None = Field(None, alias="latencyMs")
    token_usage: _TokenUsage | None = Field(None, alias="tokenUsage")
    cost: float | None = None
    error: str | None = None
    skipped: bool = False
    # Provenance of the reply (`core.provenance`, in the tool's camelCase), read when a record carries it
    # (the published runs here carry none; their `provider` is the gateway, "openrouter", not the upstream).
    response_id: str | None = Field(None, alias="responseId")
    response_model: str | None = Field(None, alias="responseModel")
    finish_reason: str | None = Field(None, alias="finishReason")
    response_provider: str | None = Field(None, alias="responseProvider")
    system_fingerprint: str | None = Field(None, alias="systemFingerprint")

    @field_validator("cost")
    @classmethod
    def _cost_is_trustworthy(cls, cost: float | None) -> float | None:
        """A negative or non-finite recorded cost is unknown, never summed."""
        return cost if cost is not None and math.isfinite(cost) and cost >= 0 else None


class ImportedRecord(BaseModel):
    """One question's answer from a published run, in the pipeline's terms."""

    model_config = ConfigDict(frozen=True)

    model_key: str = Field(description="Registry-style key: model id + reasoning/protocol suffixes")
    model: str
    protocol: Protocol
    reasoning_effort: str | None
    qid: str
    edition: int
    number: int
    raw_response: str
    reasoning: str | None
    parser_version: str = PARSER_VERSION
    answer_strict: Letter | None = Field(description="Re-parsed by our oabench-v1 parser")
    answer_lenient: Letter | None
    recorded_strict: Letter | None = Field(description="As the original tool recorded it")
    recorded_lenient: Letter | None
    latency_ms: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    cost_usd: float | None
    error: str | None
    skipped: bool = Field(description="Annulled question: OABench made no API call")
    timestamp: datetime
    run_id: str
    provenance: Provenance = Provenance()


def _read_config(run_dir: Path) -> _RunConfig:
    path = run_dir / "config.json"
    try:
        return _RunConfig.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, json.JSONDecodeError, ValidationError) as error:
        raise PublishedRunError(f"{path}: not a readable OABench run config: {error}") from error


def _to_record(line: _InferenceLine, config: _RunConfig, run_id: str) -> ImportedRecord:
    effort = config.effective_reasoning_effort
    parsed = parse_answer(line.raw_response, PARSER_VERSION)
    usage = line.token_usage or _TokenUsage()
    return ImportedRecord(
        model_key=derive_model_key(config.model, effort, False, config.protocol),
        model=config.model,
        protocol=config.protocol,
        reasoning_effort=effort,
        qid=line.qid,
        edition=line.edition,
        number=line.question_number,
        raw_response=line.raw_response,
        reasoning=line.reasoning,
        answer_strict=parsed.strict,
        answer_lenient=parsed.lenient,
        recorded_strict=line.parsed_answer.strict,
        recorded_lenient=line.parsed_answer.lenient,
        latency_ms=line.latency_ms,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        reasoning_tokens=usage.reasoning_tokens,
        cost_usd=line.cost,
        error=line.error,
        skipped=line.skipped,
        timestamp=line.timestamp,
        run_id=run_id,
        provenance=Provenance.from_columns(line.model_dump()),
    )


def _read_lines(path: Path) -> list[_InferenceLine]:
    """Every valid line; a torn LAST line (the tool was killed mid-write) is dropped, any other bad one raises."""
    raw_lines = [
        (n, text) for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if text.strip()
    ]
    lines: list[_InferenceLine] = []
    for position, (number, text) in enumerate(raw_lines):
        try:
            lines.append(_InferenceLine.model_validate_json(text))
        except ValidationError as error:
            if position == len(raw_lines) - 1 and not text.rstrip().endswith("}"):
                break
            raise PublishedRunError(f"{path}:{number}: not an OABench inference record: {error}") from error
    return lines


def read_published_run(run_dir: Path) -> list[ImportedRecord]:
    """The records of one run folder, one per qid: a resumed run appends, so the last line for a qid wins.

    The folder's name is the run id (OABench names the folder after its `runId`).
    """
    config = _read_config(run_dir)
    inferences = run_dir / "inferences.jsonl"
    if not inferences.is_file():
        return []
    latest: dict[str, _InferenceLine] = {}
    for line in _read_lines(inferences):
        latest.pop(line.qid, None)  # re-insert so the order reflects the winning line's position
        latest[line.qid] = line
    return [_to_record(line, config, run_dir.name) for line in latest.values()]


def published_run_dirs(path: Path) -> list[Path]:
    """The run folders under `path` (those with a config.json), in name order, i.e. by start time."""
    return sorted(p for p in Path(path).iterdir() if p.is_dir() and (p / "config.json").is_file())


def read_published_runs(path: Path) -> list[ImportedRecord]:
    """All records of all run folders under `path`, run by run: each run keeps its own answers."""
    return [record for run_dir in published_run_dirs(path) for record in read_published_run(run_dir)]


def read_published_summary(run_dir: Path) -> dict[str, Any] | None:
    """The run's `summary.json` as written by OABench, or None for an unfinished run (it has none)."""
    path = Path(run_dir) / "summary.json"
    if not path.is_file():
        return None
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise PublishedRunError(f"{path}: invalid JSON: {error}") from error
    if not isinstance(summary, dict):
        raise PublishedRunError(f"{path}: expected a JSON object")
    return summary


class RunSummary(BaseModel):
    """What the warehouse keeps of one imported run folder (table `published_run_summaries`)."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    model_key: str
    model: str
    has_summary: bool = Field(description="False: the run was aborted (OABench wrote no summary.json)")
    editions: list[int] = Field(description="Editions the summary lists: the cells the run completed")
    completed_at: datetime | None
    actual_cost_usd: float | None
    estimated_cost_usd: float | None
    prompt_price_per_token: float | None
    completion_price_per_token: float | None
    pricing_fetched_at: datetime | None


class _SummaryPricing(BaseModel):
    model_config = ConfigDict(extra="ignore")

    fetched_at: datetime | None = Field(None, alias="fetchedAt")
    prompt_price_per_token: float | None = Field(None, alias="promptPricePerToken")
    completion_price_per_token: float | None = Field(None, alias="completionPricePerToken")
    estimated_cost_usd: float | None = Field(None, alias="estimatedCostUsd")


class _SummaryEdition(BaseModel):
    model_config = ConfigDict(extra="ignore")

    edition: int


class _SummaryCost(BaseModel):
    model_config = ConfigDict(extra="ignore")

    actual_cost_usd: float | None = Field(None, alias="actualCostUsd")


class _Summary(BaseModel):
    model_config = ConfigDict(extra="ignore")

    completed_at: datetime | None = Field(None, alias="completedAt")
    editions: list[_SummaryEdition] = []
    cost: _SummaryCost = Field(default_factory=_SummaryCost)
    pricing: _SummaryPricing = Field(default_factory=_SummaryPricing)


def read_run_summary(run_dir: Path) -> RunSummary:
    """The run's identity, the editions its summary says it completed, and the summary's cost and prices."""
    config = _read_config(run_dir)
    key = derive_model_key(config.model, config.effective_reasoning_effort, False, config.protocol)
    raw = read_published_summary(run_dir)
    if raw is None:
        summary = _Summary()
    else:
        try:
            summary = _Summary.model_validate(raw)
        except ValidationError as error:
            raise PublishedRunError(f"{run_dir / 'summary.json'}: not an OABench summary: {error}") from error
    return RunSummary(
        run_id=run_dir.name,
        model_key=key,
        model=config.model,
        has_summary=raw is not None,
        editions=sorted(e.edition for e in summary.editions),
        completed_at=summary.completed_at,
        actual_cost_usd=summary.cost.actual_cost_usd,
        estimated_cost_usd=summary.pricing.estimated_cost_usd,
        prompt_price_per_token=summary.pricing.prompt_price_per_token,
        completion_price_per_token=summary.pricing.completion_price_per_token,
        pricing_fetched_at=summary.pricing.fetched_at,
    )


# ---------------------------------------------------------------------------------------------------------
# Validation at the door: every folder is checked before anything is imported
# ---------------------------------------------------------------------------------------------------------

_QID = re.compile(r"oab-(\d+)-1f-q(\d+)")
QUESTIONS_PER_EDITION = 80
MAX_REPORTED_PROBLEMS = 10


def _line_problems(path: Path, number: int, line: _InferenceLine, ingested: Collection[str]) -> list[str]:
    where = f"{path}:{number}"
    problems = []
    if problem := safe_name_problem(line.model):
        problems.append(f"{where}: field 'model': {problem}")
    if str(line.edition) not in ingested:
        problems.append(
            f"{where}: field 'edition': edition {line.edition} is not ingested "
            f"(run `oabench ingest --editions {line.edition}` first)"
        )
    found = _QID.fullmatch(line.qid)
    expected = f"oab-{line.edition}-1f-q{line.question_number}"
    if found is None or line.qid != expected or not 1 <= line.question_number <= QUESTIONS_PER_EDITION:
        problems.append(
            f"{where}: field 'qid': {line.qid!r} is not {expected!r} "
            f"(oab-{{edition}}-1f-q{{1..{QUESTIONS_PER_EDITION}}} matching edition and questionNumber)"
        )
    return problems


def run_folder_problems(run_dir: Path, ingested: Collection[str]) -> list[str]:
    """Everything wrong with one run folder, each as `file[:line]: field 'x': problem` (empty: importable)."""
    try:
        config = _read_config(run_dir)
    except PublishedRunError as error:
        return [str(error)]
    problems = []
    config_path = run_dir / "config.json"
    if problem := safe_name_problem(config.model):
        problems.append(f"{config_path}: field 'model': {problem}")
    else:
        key = derive_model_key(config.model, config.effective_reasoning_effort, False, config.protocol)
        if problem := key_problem(key):
            problems.append(f"{config_path}: field 'model': model key {problem}")
    inferences = run_dir / "inferences.jsonl"
    if not inferences.is_file():
        return problems
    try:
        text = inferences.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return [*problems, f"{inferences}: cannot read: {error}"]
    numbered = [(n, t) for n, t in enumerate(text.splitlines(), 1) if t.strip()]
    for position, (number, raw) in enumerate(numbered):
        try:
            line = _InferenceLine.model_validate_json(raw)
        except ValidationError as error:
            if position == len(numbered) - 1 and not raw.rstrip().endswith("}"):
                break  # a torn last line, dropped on import as well
            problems.append(
                f"{inferences}:{number}: not an OABench inference record: {error.errors()[0]['msg']}"
            )
            continue
        problems.extend(_line_problems(inferences, number, line, ingested))
    return problems


def validate_published_runs(path: Path, ingested: Collection[str]) -> None:
    """Check every run folder under `path` before any is imported: all or nothing.

    Model ids must be safe names (the registry's alphabet), editions ingested, and every qid
    `oab-{edition}-1f-q{n}` of its line's edition and question number. Models absent from the registry
    and unfinished runs (no summary) are fine. Raises PublishedRunError listing the first problems.
    """
    problems = [p for run_dir in published_run_dirs(path) for p in run_folder_problems(run_dir, ingested)]
    if problems:
        shown = problems[:MAX_REPORTED_PROBLEMS]
        more = len(problems) - len(shown)
        raise PublishedRunError(
            f"nothing imported, {len(problems)} problem(s): "
            + "; ".join(shown)
            + (f"; and {more} more" if more else "")
        )

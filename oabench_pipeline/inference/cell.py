"""One benchmark cell (model key × edition): which requests to send, and the rows it ends with.

No Dagster here: the asset in `inference/assets.py` calls these with the cell's questions, its response
log and the rows the partition already holds.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from oabench_pipeline.core.answer_parsing import PARSER_VERSION, parse_answer
from oabench_pipeline.core.baselines import baseline_answer
from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.core.prompts import (
    Protocol,
    body_suffix,
    build_messages,
    build_request_body,
    hash_with_suffix,
    messages_digest,
    request_hash,
)
from oabench_pipeline.core.records import Letter
from oabench_pipeline.core.runs import live_run_id
from oabench_pipeline.inference.types import ChatRequest, ChatResult

ANSWERED = pl.col("error").is_null() & pl.col("raw_response").is_not_null() & (pl.col("raw_response") != "")
# A final reply, an empty one included: the model answered nothing on every attempt (`client.py`), which is
# recorded as its answer, scored invalid, and not asked again unless `--retry-invalid` says so.
REPLIED = pl.col("error").is_null() & pl.col("raw_response").is_not_null()


def is_invalid_reply(result: ChatResult) -> bool:
    """A final reply no letter is extracted from (empty, or unparseable): what `invalid_count` counts."""
    return result.ok and parse_answer(result.raw_response or "").lenient is None


def cell_name(model_key: str, edition: int | str) -> str:
    """A cell's partition key as text: `str(MultiPartitionKey)`, dimensions in name order (edition, model).

    Kept free of Dagster so that checking whether a cell is up to date needs no Dagster import.
    """
    return f"{edition}|{model_key}"


@dataclass(frozen=True)
class CellPlan:
    requests: list[ChatRequest]
    """A request for every active question, in question order."""
    pending: list[ChatRequest]
    """The requests with no successful answer yet: the only ones to send."""
    kept: Mapping[str, dict]
    """qid → an answered row of this run the partition already holds, that stays as it is."""
    replicate: int = 1
    """Which live replicate of the cell this plans (its index is hashed into requests from 2 on)."""

    @property
    def complete(self) -> bool:
        """Every active question has a reply in the log and a row in the partition: nothing to do."""
        return not self.pending and len(self.kept) == len(self.requests)


class KeptRows(Mapping[str, dict]):
    """qid → a row of `rows` (the row at `index[qid]`), built when asked for: `oabench status` and a no-op
    `oabench run` only count a cell's kept rows, and building every row of thousands of cells as a dict was
    a sixth of their CPU."""

    def __init__(self, rows: pl.DataFrame, index: dict[str, int]) -> None:
        self._rows = rows
        self._index = index

    def __getitem__(self, qid: str) -> dict:
        return self._rows.row(self._index[qid], named=True)

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, qid: object) -> bool:
        return qid in self._index


def build_requests(model: ModelConfig, questions: pl.DataFrame, replicate: int = 1) -> list[ChatRequest]:
    """The exact OABench request for every active question of the cell (hashed with its replicate).

    Remembered for the last few (model, questions frame, replicate): `oabench status` and a no-op `oabench
    run` ask it twice of each of thousands of cells (its plan, then whether its rows were asked this way),
    passing each edition's one questions frame; a new frame is a new entry. Callers must not mutate the
    returned list."""
    key = (id(questions), model.id, model.protocol, model.reasoning_effort, model.web_search, replicate)
    with _cache_lock:
        cached = _requests_cache.get(key)
    if cached is not None and cached[0] is questions:
        return cached[1]
    requests = []
    # The body's part after the messages is the model's, the same for every question: encoded once.
    suffix = body_suffix(build_request_body(model.id, [], model.reasoning_effort, model.web_search))
    for qid, messages, digest in _prompts(questions, model.protocol):
        body = build_request_body(model.id, messages, model.reasoning_effort, model.web_search)
        hashed = hash_with_suffix(digest, suffix) if replicate == 1 else request_hash(body, replicate)
        requests.append(ChatRequest(qid=qid, body=body, request_hash=hashed))
    # The frame is held with its entry, so its id cannot be reused by another frame while the entry lives.
    with _cache_lock:
        _requests_cache[key] = (questions, requests)
        while len(_requests_cache) > _REQUESTS_CACHED:
            _requests_cache.popitem(last=False)
    return requests


_REQUESTS_CACHED = 4  # (edition, model)'s cells come in turn: a few entries serve every repeated question
_cache_lock = threading.Lock()
_requests_cache: OrderedDict[tuple, tuple[pl.DataFrame, list[ChatRequest]]] = OrderedDict()
_FRAMES_CACHED = 64  # an edition's questions each: more than every edition a command asks about
_prompts_cache: OrderedDict[tuple[int, str], tuple[pl.DataFrame, list]] = OrderedDict()


def _prompts(questions: pl.DataFrame, protocol: Protocol) -> list[tuple[str, list[dict[str, str]], Any]]:
    """(qid, messages, `messages_digest`) of each active question in booklet order, remembered per frame and
    protocol: every model of an edition asks for the same frame's, and only the model's part of each body
    is then encoded and hashed."""
    key = (id(questions), protocol)
    with _cache_lock:
        cached = _prompts_cache.get(key)
    if cached is not None and cached[0] is questions:
        return cached[1]
    prompts = []
    for q in questions.filter(pl.col("status") == "active").sort("number").iter_rows(named=True):
        messages = build_messages(
            protocol, q["number"], q["stem"], q["choice_a"], q["choice_b"], q["choice_c"], q["choice_d"]
        )
        prompts.append((q["qid"], messages, messages_digest(messages)))
    with _cache_lock:
        _prompts_cache[key] = (questions, prompts)
        while len(_prompts_cache) > _FRAMES_CACHED:
            _prompts_cache.popitem(last=False)
    return prompts


def plan_cell(
    model: ModelConfig,
    questions: pl.DataFrame,
    logged: dict[str, ChatResult],
    existing: pl.DataFrame,
    replicate: int = 1,
    retry_invalid: bool = False,
) -> CellPlan:
    """Send only what replicate `replicate` has no reply to: not in the log, not a row of its run.

    An existing row counts as replied when it belongs to this live run and was asked exactly this way
    (same request hash). Rows of other runs (an imported folder, another replicate) are other runs:
    they are never mixed into this one. `existing` must carry logical run ids (`with_logical_run_ids`).
    A final reply counts even when it is invalid (empty, no letter in it): asking again would most likely
    pay for the same reply. `retry_invalid` (`oabench run --retry-invalid`) asks those again too.
    """
    requests = build_requests(model, questions, replicate)
    kept: Mapping[str, dict] = {}
    if not existing.is_empty():
        hashes = {r.qid: r.request_hash for r in requests}
        run_id = live_run_id(model.key, replicate)
        # The rows of this run that replied (REPLIED; with `retry_invalid`, validly), in Python over the
        # columns' values: a frame filter per cell cost more, for the thousands of cells of `status`.
        names = ["qid", "request_hash", "run_id", "error", "raw_response"]
        columns = [existing[name].to_list() for name in names]
        lenient = existing["answer_lenient"].to_list() if retry_invalid else [True] * existing.height
        # A qid's last matching row, as a dict built row by row kept it.
        index = {
            qid: i
            for i, (qid, hashed, row_run, error, raw_response, valid) in enumerate(
                zip(*columns, lenient, strict=True)
            )
            if error is None
            and raw_response is not None
            and row_run == run_id
            and valid is not None
            and hashed == hashes.get(qid)
        }
        kept = KeptRows(existing, index)

    def replied(request: ChatRequest) -> bool:
        done = logged.get(request.request_hash)
        return done is not None and done.ok and not (retry_invalid and is_invalid_reply(done))

    pending = [r for r in requests if r.qid not in kept and not replied(r)]
    return CellPlan(requests=requests, pending=pending, kept=kept, replicate=replicate)


def replicate_plans(
    model: ModelConfig,
    questions: pl.DataFrame,
    logged: dict[str, ChatResult],
    existing: pl.DataFrame,
    target: int,
    complete_elsewhere: int = 0,
    retry_invalid: bool = False,
) -> list[CellPlan]:
    """The live replicates that need work so the cell has `target` complete runs.

    Complete runs of the cell count whatever their source (`complete_elsewhere`: imported ones whose
    summary lists the edition); live replicates are taken in order 1, 2, …: a complete one counts, the
    first incomplete ones are resumed (or started). Empty: the cell already has `target` complete runs.
    `retry_invalid`: a live replicate with an invalid reply needs work too (`plan_cell`).
    """
    plans: list[CellPlan] = []
    have, replicate = complete_elsewhere, 1
    while have + len(plans) < target:
        plan = plan_cell(model, questions, logged, existing, replicate, retry_invalid)
        if plan.complete:
            have += 1
        else:
            plans.append(plan)
        replicate += 1
    return plans


def complete_imported_runs(
    existing: pl.DataFrame, edition: int, summary_editions: dict[str, list[int]]
) -> int:
    """Imported runs in the partition whose summary says they completed `edition`."""
    if existing.is_empty():
        return 0
    # Python over the columns' values: asked of every cell by `status` and a no-op `run`.
    pairs = zip(existing["source"].to_list(), existing["run_id"].to_list(), strict=True)
    imported = {run_id for source, run_id in pairs if source == "imported" and run_id is not None}
    return sum(1 for run_id in imported if edition in summary_editions.get(run_id, []))


def _identity(model: ModelConfig, q: dict) -> dict:
    return {
        "model_key": model.key,
        "model": model.id,
        "protocol": model.protocol,
        "reasoning_effort": model.reasoning_effort,
        "web_search": model.web_search,
        "qid": q["qid"],
        "edition": q["edition"],
        "number": q["number"],
    }


def _answer_fields(raw: str | None) -> dict:
    parsed = parse_answer(raw or "")
    return {
        "answer_strict": parsed.strict,
        "answer_lenient": parsed.lenient,
        "parser_version": PARSER_VERSION,
    }


def _skipped_row(model: ModelConfig, q: dict, now: dt.datetime, run_id: str, source: str) -> dict:
    return {
        **_identity(model, q),
        "raw_response": None,
        "answer_strict": None,
        "answer_lenient": None,
        "parser_version": PARSER_VERSION,
        "skipped": True,
        "attempts": 0,
        "latency_ms": 0,
        "source": source,
        "created_at": now,
        "run_id": run_id,
    }


def _result_row(model: ModelConfig, q: dict, result: ChatResult, run_id: str) -> dict:
    return {
        **_identity(model, q),
        "raw_response": result.raw_response,
        "reasoning": result.reasoning,
        **_answer_fields(result.raw_response if result.ok else None),
        "latency_ms": result.latency_ms,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "reasoning_tokens": result.reasoning_tokens,
        "cost_usd": result.total_cost_usd if result.total_cost_usd is not None else result.cost_usd,
        "error": result.error,
        "skipped": False,
        "attempts": result.attempts,
        "request_hash": result.request_hash,
        "source": "live",
        "created_at": result.finished_at,
        "run_id": run_id,
        "batch_id": result.batch_id,
        **result.provenance.columns(),
    }


def _missing_row(
    model: ModelConfig, q: dict, request: ChatRequest, reason: str, now: dt.datetime, run_id: str
) -> dict:
    return {
        **_identity(model, q),
        **_answer_fields(None),
        "error": reason,
        "skipped": False,
        "attempts": 0,
        "request_hash": request.request_hash,
        "source": "live",
        "created_at": now,
        "run_id": run_id,
    }


def api_cell_rows(
    model: ModelConfig,
    questions: pl.DataFrame,
    plan: CellPlan,
    logged: dict[str, ChatResult],
    run_id: str,
    not_sent_reason: str = "not sent",
) -> list[dict]:
    """One row per question: kept rows, logged results, skipped annulled questions, or an error row."""
    now = dt.datetime.now(dt.UTC)
    by_qid = {r.qid: r for r in plan.requests}
    rows = []
    for q in questions.sort("number").iter_rows(named=True):
        if q["status"] != "active":
            rows.append(_skipped_row(model, q, now, run_id, "live"))
        elif q["qid"] in plan.kept:
            rows.append(plan.kept[q["qid"]])
        elif (result := logged.get(by_qid[q["qid"]].request_hash)) is not None:
            rows.append(_result_row(model, q, result, run_id))
        else:
            rows.append(_missing_row(model, q, by_qid[q["qid"]], not_sent_reason, now, run_id))
    return rows


def baseline_cell_rows(model: ModelConfig, questions: pl.DataFrame, run_id: str, seed: int = 0) -> list[dict]:
    """Offline baselines answer from the question alone, through the very same table."""
    now = dt.datetime.now(dt.UTC)
    rows = []
    for q in questions.sort("number").iter_rows(named=True):
        if q["status"] != "active":
            rows.append(_skipped_row(model, q, now, run_id, "baseline"))
            continue
        choices: dict[Letter, str] = {
            "A": q["choice_a"],
            "B": q["choice_b"],
            "C": q["choice_c"],
            "D": q["choice_d"],
        }
        letter = baseline_answer(model.id, q["qid"], choices, seed=seed)
        rows.append(
            {
                **_identity(model, q),
                "raw_response": letter,
                **_answer_fields(letter),
                "latency_ms": 0,
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "reasoning_tokens": 0,
                "cost_usd": 0.0,
                "skipped": False,
                "attempts": 0,
                "source": "baseline",
                "created_at": now,
                "run_id": run_id,
            }
        )
    return rows

"""Replies with long reasoning are held once: the response log is read line by line, and a partition of
them is encoded a few replies at a time (the figure for a whole `oabench run`: benchmarks/reasoning_memory.py)."""

from __future__ import annotations

import datetime as dt
import tracemalloc
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from oabench_pipeline.core.provenance import Provenance
from oabench_pipeline.inference.response_log import ResponseLog, latest_by_hash, read_log
from oabench_pipeline.inference.types import ChatResult
from oabench_pipeline.warehouse import Warehouse

REPLIES, REASONING_BYTES = 20, 400_000


def reasoning(n: int, size: int = REASONING_BYTES) -> str:
    return (f"step {n}: weighing the choices against the statute. " * (size // 40 + 1))[:size]


def reply(n: int) -> ChatResult:
    return ChatResult(
        qid=f"oab-45-1f-q{n}",
        request_hash=f"h{n}",
        raw_response="Resposta: A",
        reasoning=reasoning(n),
        latency_ms=5,
        prompt_tokens=900,
        completion_tokens=3,
        reasoning_tokens=100_000,
        cost_usd=None,
        error=None,
        attempts=1,
        finished_at=dt.datetime.now(dt.UTC),
        total_cost_usd=None,
        provenance=Provenance(),
        cost_note=None,
    )


def test_reading_a_response_log_holds_each_reasoning_once(tmp_path: Path) -> None:
    log_path = tmp_path / "45.jsonl"
    with ResponseLog(log_path, reserve_bytes=0) as log:
        for n in range(REPLIES):
            log.append(reply(n))
    tracemalloc.start()
    try:
        logged = latest_by_hash(read_log(log_path))
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    total = REPLIES * REASONING_BYTES
    assert [logged[f"h{n}"].reasoning for n in range(REPLIES)] == [reasoning(n) for n in range(REPLIES)]
    assert held < 1.2 * total  # the replies themselves
    assert peak < 1.3 * total, f"{peak / total:.2f} copies at the peak"  # the file whole, then split: 2.9


def test_a_partition_of_long_replies_is_encoded_a_few_at_a_time(tmp_path: Path) -> None:
    """polars encodes a whole row group at once (~4× its bytes): one of 80 MB of reasoning peaked at 350 MB
    more. Ordinary partitions stay one row group."""
    warehouse = Warehouse(tmp_path / "warehouse" / "oabench.duckdb")
    long = pl.DataFrame(
        {
            "qid": [f"oab-45-1f-q{n}" for n in range(40)],
            "reasoning": [reasoning(n, 1_000_000) for n in range(40)],
        }
    )
    written = warehouse.write_partition("inferences", long, "45|acme/thinker")
    assert pq.ParquetFile(written).num_row_groups > 1
    back = warehouse.read("inferences", "45|acme/thinker")
    assert back["reasoning"].to_list() == long["reasoning"].to_list()
    short = warehouse.write_partition(
        "inferences", long.with_columns(pl.lit("A").alias("reasoning")), "45|acme/m"
    )
    assert pq.ParquetFile(short).num_row_groups == 1

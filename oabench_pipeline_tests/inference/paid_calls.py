"""Relating what the client kept (response logs, inference rows) to what the server was paid for.

The replay server identifies a paid question by `prompt_key(model, user text)`; the pipeline by qid and
request hash. These helpers translate, so a test can say "this question was answered once, in total".
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from oabench_pipeline.inference.response_log import cell_log_path, read_log
from oabench_pipeline.warehouse import Warehouse
from oabench_pipeline_tests.inference.replay import question_texts
from oabench_pipeline_tests.servers.openai_replay import prompt_key

PromptKey = tuple[str, str]


def active_prompt_keys(warehouse: Warehouse, model: str, editions: list[str]) -> dict[str, PromptKey]:
    """qid → the server's key for every active question of `editions`, as `model` is asked it."""
    texts = question_texts(warehouse)
    questions = warehouse.read("questions").filter(
        (pl.col("status") == "active") & pl.col("edition").cast(pl.Utf8).is_in(editions)
    )
    return {qid: prompt_key(model, texts[qid]) for qid in questions["qid"]}


def logged_answered_qids(warehouse: Warehouse, model_key: str, editions: list[str]) -> set[str]:
    """qids whose successful answer is in the cells' response logs (what a crash cannot take back)."""
    answered: set[str] = set()
    for edition in editions:
        path = cell_log_path(warehouse.root / "responses", model_key, edition)
        answered |= {r.qid for r in read_log(path) if r.ok}
    return answered


def log_line_count(path: Path) -> int:
    """Complete lines in a response log (0 when it does not exist yet); cheap enough to poll."""
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def cell_rows(warehouse: Warehouse, model_key: str, edition: str) -> pl.DataFrame:
    """The inference rows of one cell (empty when the partition is not written)."""
    return warehouse.read("inferences", f"{edition}|{model_key}")


def error_rows(frame: pl.DataFrame) -> int:
    """Rows of active questions that hold an error instead of an answer."""
    if frame.is_empty():
        return 0
    return frame.filter(~pl.col("skipped") & pl.col("error").is_not_null()).height

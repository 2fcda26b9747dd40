"""Column contracts of every warehouse table: name, type and a description a person reads in the UI.

The writer casts each partition to its contract, so all partitions of a table share one schema and the
DuckDB views over them stay stable; the same descriptions become Dagster table-schema metadata.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl


@dataclass(frozen=True)
class Column:
    name: str
    dtype: pl.DataType | type[pl.DataType]
    description: str


def _columns(*specs: tuple[str, pl.DataType | type[pl.DataType], str]) -> tuple[Column, ...]:
    return tuple(Column(name, dtype, description) for name, dtype, description in specs)


TABLES: dict[str, tuple[Column, ...]] = {
    "editions": _columns(
        ("edition", pl.Int32, "Edition number of the Exame de Ordem Unificado (partition key)"),
        ("exam_name", pl.String, "Official name, e.g. 43º EXAME DE ORDEM UNIFICADO"),
        ("exam_date", pl.Date, "Date of the 1st-phase (objective) exam"),
        ("exam_page_url", pl.String, "The edition's page on the OAB portal"),
        ("booklet_url", pl.String, "Official URL of the question booklet (Caderno de Prova - Tipo 1)"),
        ("booklet_sha256", pl.String, "Pinned SHA-256 of the booklet PDF"),
        ("answer_key_url", pl.String, "Official URL of the definitive answer key (Gabaritos Definitivos)"),
        ("answer_key_sha256", pl.String, "Pinned SHA-256 of the answer-key PDF"),
        ("area_scheme", pl.String, "Name of the question-number → legal-area table this edition uses"),
        ("pinned_by", pl.String, "'registry' (reviewed by hand) or 'first-download' (trust on first use)"),
    ),
    "source_files": _columns(
        ("edition", pl.Int32, "Edition number"),
        ("kind", pl.String, "'booklet' or 'answer_key'"),
        ("url", pl.String, "Official URL of the file"),
        ("fetched_from", pl.String, "Where the bytes came from (the official URL or a mirror)"),
        ("sha256", pl.String, "SHA-256 of the stored bytes (equal to the pin)"),
        ("bytes", pl.Int64, "Size in bytes"),
        ("stored_at", pl.String, "Path of the file in the content-addressed raw store"),
    ),
    "questions": _columns(
        ("qid", pl.String, "Question id as in published OABench runs: oab-{edition}-1f-q{number}"),
        ("edition", pl.Int32, "Edition number"),
        ("number", pl.Int32, "Question number in booklet TIPO 1 (1-80)"),
        ("area", pl.String, "Legal area, from the edition's area table"),
        ("stem", pl.String, "Question text, in reading order, without running headers and footers"),
        ("choice_a", pl.String, "Text of choice (A)"),
        ("choice_b", pl.String, "Text of choice (B)"),
        ("choice_c", pl.String, "Text of choice (C)"),
        ("choice_d", pl.String, "Text of choice (D)"),
        ("status", pl.String, "'active', or 'annulled' when the definitive key annuls it"),
        ("requires_image", pl.Boolean, "A picture lies inside the question's own region"),
        ("pages", pl.List(pl.Int32), "1-based booklet pages the question spans"),
        ("source_sha256", pl.String, "SHA-256 of the booklet PDF the text was read from"),
    ),
    "answer_keys": _columns(
        ("qid", pl.String, "Question id"),
        ("edition", pl.Int32, "Edition number"),
        ("number", pl.Int32, "Question number in booklet TIPO 1"),
        ("correct", pl.String, "Correct letter A-D; NULL when annulled"),
        ("status", pl.String, "'active' or 'annulled' ('*' in the official key)"),
        ("source_sha256", pl.String, "SHA-256 of the answer-key PDF"),
    ),
    "models": _columns(
        ("model_key", pl.String, "Configuration key: model id + :reasoning-{effort} + :web + :deliberativo"),
        ("model", pl.String, "Model id sent to the endpoint"),
        ("label", pl.String, "Display name"),
        ("provider", pl.String, "Who makes the model"),
        ("protocol", pl.String, "'direto' (letter only) or 'deliberativo' (reason, then FINAL_ANSWER)"),
        ("reasoning_effort", pl.String, "OpenRouter reasoning effort (low/medium/high) or NULL"),
        ("web_search", pl.Boolean, "OpenRouter web plugin enabled"),
        ("base_url", pl.String, "OpenAI-compatible endpoint (NULL for offline baselines)"),
        ("kind", pl.String, "'api', 'baseline' or 'imported' (known only from a published run)"),
        ("concurrency", pl.Int32, "Requests in flight"),
        ("max_cost_usd", pl.Float64, "Budget per run of a cell, if any"),
        ("knowledge_cutoff", pl.Date, "Training-data cutoff, for the contamination analysis"),
        ("in_registry", pl.Boolean, "Still listed in the models registry (removed keys keep their history)"),
    ),
    "inferences": _columns(
        ("model_key", pl.String, "Model configuration key (partition dimension `model`)"),
        ("model", pl.String, "Model id sent to the endpoint"),
        ("protocol", pl.String, "'direto' or 'deliberativo'"),
        ("reasoning_effort", pl.String, "Reasoning effort sent, or NULL"),
        ("web_search", pl.Boolean, "Web plugin enabled"),
        ("qid", pl.String, "Question id"),
        ("edition", pl.Int32, "Edition number (partition dimension `edition`)"),
        ("number", pl.Int32, "Question number"),
        ("raw_response", pl.String, "The model's reply, verbatim; NULL when skipped or failed"),
        ("reasoning", pl.String, "Reasoning text returned by the endpoint, if any"),
        ("answer_strict", pl.String, "Letter when the whole reply is just a letter (strict parse)"),
        ("answer_lenient", pl.String, "Letter extracted by the lenient rules (the scored answer)"),
        ("parser_version", pl.String, "Answer-parser version used for the two answers"),
        ("latency_ms", pl.Int64, "Wall time of the successful attempt"),
        ("prompt_tokens", pl.Int64, "Prompt tokens reported by the endpoint"),
        ("completion_tokens", pl.Int64, "Completion tokens reported (reasoning included)"),
        ("reasoning_tokens", pl.Int64, "Reasoning tokens reported"),
        ("cost_usd", pl.Float64, "Cost reported by the endpoint (OpenRouter usage.cost), all attempts"),
        ("error", pl.String, "Why there is no answer (after retries); NULL when answered"),
        ("skipped", pl.Boolean, "Annulled question: no call made, credited to everyone"),
        ("attempts", pl.Int32, "HTTP attempts made for this answer"),
        ("request_hash", pl.String, "SHA-256 of the exact request body (model, prompts, parameters)"),
        ("source", pl.String, "'live', 'baseline' or 'imported'"),
        ("created_at", pl.Datetime("us", "UTC"), "When the answer arrived"),
        ("run_id", pl.String, "Dagster run (or published OABench run) that produced the row"),
    ),
    "model_pricing": _columns(
        ("fetched_at", pl.Datetime("us", "UTC"), "When this snapshot of the endpoint's price list was taken"),
        ("base_url", pl.String, "Endpoint whose /models list was read"),
        ("model", pl.String, "Model id"),
        ("prompt_price_per_token", pl.Float64, "USD per prompt token"),
        ("completion_price_per_token", pl.Float64, "USD per completion token"),
    ),
}


def table_columns(table: str) -> tuple[Column, ...]:
    return TABLES[table]


def conform(table: str, frame: pl.DataFrame) -> pl.DataFrame:
    """Cast and order `frame` to the table's contract; extra columns are an error, missing ones become NULL."""
    columns = TABLES.get(table)
    if columns is None:
        return frame
    names = {c.name for c in columns}
    extra = [name for name in frame.columns if name not in names]
    if extra:
        raise ValueError(f"table {table!r} has no columns {extra}")
    return frame.select(
        [
            pl.col(c.name).cast(c.dtype)
            if c.name in frame.columns
            else pl.lit(None, dtype=c.dtype).alias(c.name)
            for c in columns
        ]
    )


def empty_frame(table: str) -> pl.DataFrame:
    """A table with its contracted columns and no rows."""
    return pl.DataFrame(schema={c.name: c.dtype for c in TABLES[table]})

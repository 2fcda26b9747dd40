"""Helpers that turn tables into Dagster metadata a person reads in the UI."""

from __future__ import annotations

import polars as pl
from dagster import MetadataValue, TableColumn, TableSchema

from oabench_pipeline.core.markdown import markdown_table
from oabench_pipeline.core.tables import table_columns

_TYPE_NAMES = {"String": "string", "Int32": "int", "Int64": "int", "Float64": "float", "Boolean": "bool"}


def table_schema(table: str) -> MetadataValue:
    """The table's column contract as Dagster table-schema metadata (shown on the asset page)."""
    columns = [
        TableColumn(name=c.name, type=_TYPE_NAMES.get(str(c.dtype), str(c.dtype)), description=c.description)
        for c in table_columns(table)
    ]
    return MetadataValue.table_schema(TableSchema(columns=columns))


def markdown_preview(
    frame: pl.DataFrame, columns: list[str], rows: int = 5, width: int = 90
) -> MetadataValue:
    """A few rows as a Markdown table, long text cut to `width` characters."""
    head = frame.select(columns).head(rows)
    cells = [[_cell(value, width) for value in record] for record in head.iter_rows()]
    return MetadataValue.md("\n".join(markdown_table(columns, cells)))


def _cell(value: object, width: int) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"

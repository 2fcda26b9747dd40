"""Resources: the Dagster-facing handle on the warehouse and its raw file store (every domain uses it; the
exam sources' resource is `exams/resources.py`)."""

from __future__ import annotations

from pathlib import Path

from dagster import ConfigurableResource

from oabench_pipeline.shared.raw_store import RawStore
from oabench_pipeline.warehouse import Warehouse


class WarehouseResource(ConfigurableResource):
    """The DuckDB warehouse (Parquet partitions + a catalogue of views) and the raw file store."""

    path: str
    raw_dir: str

    def warehouse(self) -> Warehouse:
        return Warehouse(Path(self.path))

    def raw_store(self) -> RawStore:
        return RawStore(Path(self.raw_dir))

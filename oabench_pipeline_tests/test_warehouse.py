"""The warehouse write path: atomic partition files, views over them, leftovers of killed writers."""

from __future__ import annotations

import os
import time
from pathlib import Path

import duckdb
import polars as pl

from oabench_pipeline.warehouse import (
    STALE_TEMPORARY_S,
    Warehouse,
    partition_file_name,
    partition_key_of,
    views_refreshed_once,
)


def frame(n: int) -> pl.DataFrame:
    return pl.DataFrame({"model_key": ["m"] * n, "value": list(range(n))})


def test_partition_replaced_and_visible_through_duckdb_file(tmp_path: Path) -> None:
    warehouse = Warehouse(tmp_path / "oabench.duckdb")
    warehouse.write_partition("things", frame(3), "a")
    warehouse.write_partition("things", frame(2), "b")
    warehouse.write_partition("things", frame(5), "a")
    con = duckdb.connect(str(tmp_path / "oabench.duckdb"), read_only=True)
    assert con.execute("select count(*) from things").fetchone() == (7,)
    assert warehouse.partitions("things") == ["a", "b"]


def test_writes_of_a_run_refresh_the_catalogue_once_at_its_end(tmp_path: Path) -> None:
    warehouse = Warehouse(tmp_path / "oabench.duckdb")
    with views_refreshed_once():
        warehouse.write_partition("things", frame(3), "a")
        warehouse.write_partition("others", frame(2))
        assert not warehouse.db_path.exists()  # no catalogue rebuilt per new table
        assert warehouse.read("things").height == 3  # the files are there, read without views
    with duckdb.connect(str(warehouse.db_path), read_only=True) as con:
        assert con.execute("select count(*) from things").fetchone() == (3,)
        assert con.execute("select count(*) from others").fetchone() == (2,)
    assert warehouse.ensure_views() is False  # already up to date


def test_partition_names_survive_any_model_key() -> None:
    key = '43|evil\'; drop table x; --/módulo "x"'
    assert partition_key_of(Path(partition_file_name(key))) == key
    assert "/" not in partition_file_name(key)


def test_stale_temporaries_removed_fresh_ones_kept(tmp_path: Path) -> None:
    warehouse = Warehouse(tmp_path / "oabench.duckdb")
    folder = warehouse.table_dir("things")
    folder.mkdir(parents=True)
    stale, fresh = folder / ".dead.tmp", folder / ".live.tmp"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    old = time.time() - STALE_TEMPORARY_S - 60
    os.utime(stale, (old, old))
    warehouse.write_partition("things", frame(1), "a")
    assert not stale.exists()
    assert fresh.exists()

"""The DuckDB catalogue is derived from the partition files, so it heals; a copy never reads the original.

Each test damages a real catalogue file (deleted, emptied, replaced by an older format, copied, locked by
another process) and checks what a plain DuckDB session and the next write see.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import polars as pl
import pytest

from oabench_pipeline.warehouse import CatalogueLockedError, DamagedPartitionError, Warehouse
from oabench_pipeline_tests.pipeline_env import PipelineEnv

DUCKDB_CLI = Path(sys.executable).with_name("duckdb")


def things(n: int) -> pl.DataFrame:
    return pl.DataFrame({"model_key": ["m"] * n, "value": list(range(n))})


@pytest.fixture
def warehouse(tmp_path: Path) -> Warehouse:
    store = Warehouse(tmp_path / "original" / "oabench.duckdb")
    store.write_partition("things", things(3), "a")
    store.write_partition("other", things(1), "b")
    return store


def count(db_path: Path, table: str = "things", cwd: Path | None = None) -> int:
    """`select count(*)` through a plain read-only DuckDB session, from another working directory."""
    previous = Path.cwd()
    os.chdir(cwd or Path("/"))
    try:
        with duckdb.connect(str(db_path), read_only=True) as con:
            return con.execute(f"select count(*) from {table}").fetchone()[0]
    finally:
        os.chdir(previous)


def test_healthy_catalogue_is_left_byte_for_byte_untouched(warehouse: Warehouse) -> None:
    before = warehouse.db_path.read_bytes(), warehouse.db_path.stat().st_mtime_ns
    assert warehouse.ensure_views() is False
    assert count(warehouse.db_path) == 3  # a reader's session must not count as damage either
    assert Warehouse(warehouse.db_path).ensure_views() is False
    assert (warehouse.db_path.read_bytes(), warehouse.db_path.stat().st_mtime_ns) == before


@pytest.mark.parametrize("damage", ["deleted", "zero bytes", "new empty database", "older catalogue"])
def test_damaged_catalogue_is_rebuilt_by_the_next_check(warehouse: Warehouse, damage: str) -> None:
    path = warehouse.db_path
    path.unlink()
    if damage == "zero bytes":
        path.write_bytes(b"")
    elif damage == "new empty database":  # what `duckdb warehouse/oabench.duckdb` does to a deleted file
        duckdb.connect(str(path)).close()
    elif damage == "older catalogue":  # the previous version: views without a guard, default storage format
        with duckdb.connect(str(path)) as con:
            con.execute(
                f"create view things as select * from read_parquet('{warehouse.table_dir('things')}/*')"
            )
    assert warehouse.ensure_views() is True
    assert count(path) == 3
    assert count(path, "other") == 1
    assert warehouse.ensure_views() is False


def test_copied_warehouse_refuses_to_read_the_original_until_an_oabench_command_ran_there(
    warehouse: Warehouse, tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(warehouse.root, copy)
    (copy / "tables" / "things" / "a.parquet").unlink()
    Warehouse(copy / "oabench.duckdb").write_partition("things", things(7), "c")
    # Back to the copied catalogue file as it was (built for the original folder).
    shutil.copy2(warehouse.db_path, copy / "oabench.duckdb")
    with pytest.raises(
        duckdb.Error, match=r"built for .*original.*copied or moved.*Run an `oabench` command"
    ):
        count(copy / "oabench.duckdb")
    with pytest.raises(duckdb.Error, match="copied or moved"):
        count(copy / "oabench.duckdb", "other")
    assert count(warehouse.db_path) == 3, "the original keeps working"

    assert Warehouse(copy / "oabench.duckdb").ensure_views() is True
    assert count(copy / "oabench.duckdb") == 7
    assert count(copy / "oabench.duckdb", cwd=copy) == 7


def test_moved_warehouse_is_rebuilt_for_its_new_place(warehouse: Warehouse, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    shutil.move(warehouse.root, moved)
    with pytest.raises(duckdb.Error, match="original"):  # DuckDB names the old folder it cannot find
        count(moved / "oabench.duckdb")
    assert Warehouse(moved / "oabench.duckdb").ensure_views() is True
    assert count(moved / "oabench.duckdb") == 3


def test_catalogue_opens_in_the_duckdb_command_line(warehouse: Warehouse) -> None:
    """docs/sql.md's `duckdb warehouse/oabench.duckdb "..."`: the PyPI duckdb-cli (1.5) reads our file."""
    assert DUCKDB_CLI.is_file(), f"no duckdb command line at {DUCKDB_CLI}: the dev extras install duckdb-cli"
    done = subprocess.run(
        [str(DUCKDB_CLI), "-csv", "-noheader", str(warehouse.db_path), "select count(*) from things"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "3"


HOLD_LOCK = """
import duckdb, sys, time
con = duckdb.connect(sys.argv[1])
print("held", flush=True)
time.sleep(60)
"""


def test_catalogue_held_by_another_process_names_it_then_fails_clearly(
    warehouse: Warehouse, caplog: pytest.LogCaptureFixture
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(warehouse.db_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        store = Warehouse(warehouse.db_path, lock_timeout_s=1.0)
        with caplog.at_level(logging.WARNING), pytest.raises(CatalogueLockedError) as raised:
            store.write_partition("newtable", things(1), "x")  # a new table needs a new view
        message = str(raised.value)
        assert f"PID {holder.pid}" in message and "close that DuckDB session and rerun" in message
        assert "\n" not in message
        assert f"waiting for the DuckDB catalogue lock held by PID {holder.pid}" in caplog.text
        assert store.partition_path("newtable", "x").is_file(), "the data itself needs no catalogue lock"
    finally:
        holder.kill()
        holder.wait()
    assert Warehouse(warehouse.db_path).ensure_views() is True
    assert count(warehouse.db_path, "newtable") == 1


HOLD_LOCK_UNTIL_TOLD = """
import duckdb, sys
con = duckdb.connect(sys.argv[1])
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin
"""


class _Waiting(logging.Handler):
    """Sets `seen` when the warehouse says it waits for another process's DuckDB lock."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "waiting for the DuckDB catalogue lock" in record.getMessage():
            self.seen.set()


def test_read_lock_released_quickly_is_waited_for(warehouse: Warehouse) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK_UNTIL_TOLD, str(warehouse.db_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    waiting = _Waiting()
    warehouse_log = logging.getLogger(Warehouse.__module__)
    warehouse_log.addHandler(waiting)

    def release_once_waited_for() -> None:
        waiting.seen.wait(timeout=60)
        assert holder.stdin is not None
        holder.stdin.close()  # the holder exits, and its lock with it

    releaser = threading.Thread(target=release_once_waited_for)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        releaser.start()
        Warehouse(warehouse.db_path, lock_timeout_s=60.0).write_partition("newtable", things(2), "x")
        assert waiting.seen.is_set(), "written without waiting for the lock"
    finally:
        warehouse_log.removeHandler(waiting)
        waiting.seen.set()  # let the releaser go if the test failed before the wait
        releaser.join(timeout=60)
        holder.wait(timeout=60)
    assert count(warehouse.db_path, "newtable") == 2


def test_damaged_partition_is_one_line_naming_table_partition_file_and_remedy(warehouse: Warehouse) -> None:
    cell = "43|acme/model"
    rows = pl.DataFrame({"model_key": ["acme/model"] * 4, "qid": [f"oab-43-1f-q{n}" for n in range(1, 5)]})
    path = warehouse.write_partition("inferences", rows, cell)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    for read in (
        lambda: warehouse.read("inferences", cell),
        lambda: warehouse.read("inferences"),
        lambda: warehouse.query("select count(*) from inferences"),
    ):
        with pytest.raises(DamagedPartitionError) as raised:
            read()
        message = str(raised.value)
        assert "\n" not in message
        assert message.startswith(f"table inferences, partition {cell}: {path} is unreadable")
        assert "`oabench run --models acme/model --editions 43` rebuilds it from the response log" in message
    assert warehouse.damaged_partitions("inferences") == [path]
    assert warehouse.damaged_partitions("things") == []

    # Only what reads the damaged file fails: other tables still read, and a step that reads other cells
    # leaves it out (issue 23.2: one damaged cell must not stop the models step or another cell's scoring).
    warehouse.write_partition("models", pl.DataFrame({"model_key": ["acme/model", "acme/other"]}))
    warehouse.write_partition(
        "inferences", rows.with_columns(model_key=pl.lit("acme/other")), "44|acme/other"
    )
    assert warehouse.query("select count(*) as n from models")["n"].item() == 2
    count_answers = lambda con: con.execute("select count(*) from inferences").fetchone()[0]  # noqa: E731
    assert warehouse.read_around_damage(count_answers, "inferences") == 4
    with pytest.raises(DamagedPartitionError):
        warehouse.read_around_damage(count_answers, "inferences", needed=[cell])


def test_every_oabench_command_heals_the_catalogue(fresh_env: PipelineEnv) -> None:
    """Even a command that reads no table through DuckDB (here one that finds no leaderboard) heals it."""
    path = fresh_env.settings.warehouse_path
    assert not path.exists(), "the ingested template is copied without its catalogue"
    assert fresh_env.cli("leaderboard").exit_code == 1  # nothing ranked yet, but the views are back
    assert count(path, "questions") == 240
    before = path.read_bytes(), path.stat().st_mtime_ns
    assert fresh_env.cli("leaderboard").exit_code == 1
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before, "a healthy catalogue is not rewritten"
    path.unlink()
    duckdb.connect(
        str(path)
    ).close()  # `duckdb warehouse/oabench.duckdb` on a missing file makes an empty one
    assert fresh_env.cli("leaderboard").exit_code == 1
    assert count(path, "questions") == 240


HOLD_FILELOCK = """
import sys, time
from filelock import FileLock
with FileLock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


def test_another_oabench_refreshing_the_catalogue_is_waited_for_then_named(
    warehouse: Warehouse, caplog: pytest.LogCaptureFixture
) -> None:
    lock_file = f"{warehouse.db_path}.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_FILELOCK, lock_file], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        store = Warehouse(warehouse.db_path, lock_timeout_s=1.0)
        with caplog.at_level(logging.WARNING), pytest.raises(CatalogueLockedError) as raised:
            store.write_partition("newtable", things(1), "x")
        assert f"another oabench process kept the catalogue lock {lock_file}" in str(raised.value)
        assert "waiting for another oabench process refreshing the catalogue" in caplog.text
    finally:
        holder.kill()
        holder.wait()
    assert Warehouse(warehouse.db_path).ensure_views() is True

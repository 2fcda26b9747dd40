"""`oabench sql` bounded: Ctrl-C and SIGTERM stop a long query at once, a time and a memory limit, no
readable temporary folder, and PIVOT allowed without letting a write through."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from oabench_pipeline.cli import main
from oabench_pipeline.warehouse import Warehouse
from oabench_pipeline_tests.test_cli_output import leaderboard_rows

ENDLESS = "select sum(hash(i)) from range(1000000000000) t(i)"  # hours of CPU


@pytest.fixture
def small_warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Warehouse:
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    warehouse = Warehouse(tmp_path / "warehouse" / "oabench.duckdb")
    warehouse.write_partition("leaderboard", leaderboard_rows())
    return warehouse


def sql(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["sql", *args])
    return result.exit_code, result.output.strip()


def _catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has a handler for `signum` (its `SigCgt` mask): Python has none for SIGTERM
    until `oabench sql` installs its own around the query."""
    status = Path(f"/proc/{pid}/status").read_text()
    mask = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(mask, 16) & (1 << (signum - 1)))


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_stops_a_long_query_within_a_second(
    small_warehouse: Warehouse, tmp_path: Path, signum: int, code: int
) -> None:
    env = os.environ | {"OABENCH_WAREHOUSE": str(small_warehouse.db_path)}
    process = subprocess.Popen(
        [sys.executable, "-m", "oabench_pipeline.cli", "sql", ENDLESS],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        started = time.monotonic()  # wait for the query's handlers (or 30 s: a command that has none)
        while not _catches(process.pid, signal.SIGTERM) and time.monotonic() - started < 30:
            assert process.poll() is None
            time.sleep(0.05)
        time.sleep(1.0)  # the query is running
        sent = time.monotonic()
        process.send_signal(signum)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{signal.Signals(signum).name} did not stop the query within 15 s")
        took = time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stderr = process.stderr.read()  # type: ignore[union-attr]
    assert process.returncode == code, stderr
    name = signal.Signals(signum).name
    assert stderr.strip() == f"Error: query stopped, interrupted ({name}); nothing was printed"
    assert took < 3.0, took  # within a second on an idle machine; the slack is for a loaded one


def test_a_query_past_its_time_limit_stops(small_warehouse: Warehouse) -> None:
    started = time.monotonic()
    code, output = sql("--timeout", "0.5", ENDLESS)
    assert (code, output) == (
        1,
        "Error: query failed: stopped after 0.5 s (--timeout 0.5); give it longer with --timeout SECONDS "
        "or narrow the query",
    )
    assert time.monotonic() - started < 10


def test_a_query_past_its_memory_limit_fails_in_one_line(small_warehouse: Warehouse) -> None:
    code, output = sql("--memory", "20MB", "select list(i) from range(20000000) t(i)")
    assert code == 1 and len(output.splitlines()) == 1
    assert output.startswith("Error: query failed: Out of Memory Error: failed to allocate"), output
    assert output.endswith("the limit is --memory 20MB: raise it (e.g. --memory 8GB) or narrow the query")
    assert sql("--memory", "lots", "select 1")[1].startswith("Error: query failed: --memory 'lots': ")
    assert sql("select current_setting('memory_limit') as m") == (0, "m\n-------\n1.8 GiB")


def test_the_temporary_folder_in_the_working_directory_is_not_readable(
    small_warehouse: Warehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB allows its temporary folder (`<cwd>/.tmp/`) next to `allowed_directories`: spilling is off."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".tmp").mkdir()
    (tmp_path / ".tmp" / "secret.csv").write_text("token\nSUPERSECRET\n")
    for path in (".tmp/secret.csv", str(tmp_path / ".tmp" / "secret.csv")):
        code, output = sql(f"select * from read_csv('{path}')")
        assert code == 1 and "Permission Error: Cannot access file" in output and "SUPERSECRET" not in output
    code, output = sql("select current_setting('temp_directory') as t", "--format", "json")
    assert (code, json.loads(output)) == (0, [{"t": ""}])


def test_pivot_runs_and_a_write_around_one_is_refused(small_warehouse: Warehouse) -> None:
    code, output = sql(
        "pivot (select complete from leaderboard) on complete using count(*)", "--format", "csv"
    )
    assert (code, output.splitlines()) == (0, ["false,true", "1,1"])
    assert sql("explain analyze pivot leaderboard on complete using count(*)")[0] == 0
    assert sql("with t as (select * from leaderboard) pivot t on complete using count(*)")[0] == 0
    inside = small_warehouse.root / "inside.csv"
    for query in (
        f"copy (pivot leaderboard on complete using count(*)) to '{inside}'",
        f"COPY/* a comment */(PIVOT leaderboard ON complete USING count(*))TO'{inside}'",
        f"explain analyze copy (pivot leaderboard on complete using count(*)) to '{inside}'",
        "create table t as pivot leaderboard on complete using count(*)",
    ):
        code, output = sql(query)
        assert code == 1 and "read-only: only SELECT/SHOW/DESCRIBE/EXPLAIN queries run here, not " in output
        assert "(around a PIVOT)" in output, output
    assert not inside.exists()

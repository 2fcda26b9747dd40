"""`--editions` lists and ranges, shared by `oabench ingest`, `run` and `status` (`cli/common.py`)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from oabench_pipeline.cli import main
from oabench_pipeline.cli.common import edition_keys


def test_numbers_and_ranges_expand_ascending_once() -> None:
    assert edition_keys("1-25,37") == [str(n) for n in range(1, 26)] + ["37"]
    assert edition_keys(" 45 , 43-44, 44 ") == ["43", "44", "45"]
    assert edition_keys("7-7") == ["7"]
    assert edition_keys(None) is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("25-1", "--editions: '25-1': editions start at 1 and a range goes up (1-25)"),
        ("0", "--editions: '0': editions start at 1 and a range goes up (1-25)"),
        ("1-", "--editions: '1-' is not an edition number or a range like 1-25"),
        ("x", "--editions: 'x' is not an edition number or a range like 1-25"),
        ("1-2-3", "--editions: '1-2-3' is not an edition number or a range like 1-25"),
        (" , ", "--editions: ' , ' names no edition"),
    ],
)
def test_a_bad_item_is_a_one_line_usage_error(value: str, message: str) -> None:
    with pytest.raises(click.UsageError) as raised:
        edition_keys(value)
    assert raised.value.message == message


@pytest.mark.parametrize("command", ["ingest", "run", "status"])
def test_every_command_taking_editions_reads_ranges(command: str, tmp_path, monkeypatch) -> None:
    """Each command rejects the same bad range with the same line and exit code 2, before any work."""
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    result = CliRunner().invoke(main, [command, "--editions", "25-1"])
    assert result.exit_code == 2
    assert (
        result.output.strip().splitlines()[-1]
        == "Error: --editions: '25-1': editions start at 1 and a range goes up (1-25)"
    )


def test_ingest_names_unknown_editions_as_ranges(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    result = CliRunner().invoke(main, ["ingest", "--editions", "24-30"])
    assert result.exit_code == 2
    assert "unknown edition(s) 27,29-30; the registry has 1-26,28,36-38,43-45" in result.output

"""`oabench ui`: `dg dev` on oabench's own instance, started so that Dagster has nothing to warn about.

The command replaces itself with `dg dev` (`os.execve`); here the exec is caught and its arguments read.
Run for real, it prints neither Dagster's "Using temporary directory ... set the environment variable
DAGSTER_HOME" nor a SupersessionWarning (`dagster dev` prints both): checked by hand, docs/ui.md.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from oabench_pipeline.cli import main


class Exec(Exception):
    """Raised instead of replacing the test process."""


def start_ui(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[str, list[str], dict[str, str], str]:
    """(output, argv, environment, working directory) of the `dg dev` the command would become."""
    seen: dict = {}

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        seen.update(path=path, argv=argv, env=env, cwd=os.getcwd())
        raise Exec

    monkeypatch.setattr(os, "execve", execve)
    start = os.getcwd()
    try:
        result = CliRunner().invoke(main, ["ui", *args])
    finally:
        os.chdir(start)
    assert isinstance(result.exception, Exec), result.output
    return result.output, seen["argv"], seen["env"], seen["cwd"]


def test_ui_is_dg_dev_on_the_warehouse_instance_with_absolute_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mirror").mkdir()
    monkeypatch.setenv("OABENCH_WAREHOUSE", "data/oabench.duckdb")  # relative: from the working directory
    monkeypatch.setenv("OABENCH_SOURCE_BASE_URL", "mirror")
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    output, argv, env, cwd = start_ui(monkeypatch, "--port", "3111")
    home = tmp_path / "data" / "dagster_home"
    assert Path(argv[0]).name == "dg" and Path(argv[0]).is_file()
    assert argv[1:] == ["dev", "-m", "oabench_pipeline", "--port", "3111", "--host", "127.0.0.1"]
    assert env["DAGSTER_HOME"] == str(home) and (home / "dagster.yaml").is_file()
    # The UI runs from the instance folder (no other dagster.yaml there): every path must not depend on it.
    assert cwd == str(home)
    assert env["OABENCH_WAREHOUSE"] == str(tmp_path / "data" / "oabench.duckdb")
    assert env["OABENCH_SOURCE_BASE_URL"] == str(tmp_path / "mirror")
    assert env["OABENCH_WATCH_FILE"] == str(tmp_path / "watch.toml")
    assert all(Path(env[name]).is_absolute() for name in ("OABENCH_RAW_DIR", "OABENCH_MODELS_FILE"))
    assert output.startswith("Dagster UI on http://127.0.0.1:3111 (instance ")


def free_port() -> int:
    """A loopback port nothing listens on (the default 3000 may be taken on a shared machine)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_ui_keeps_an_exported_dagster_home_and_a_remote_mirror(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("OABENCH_SOURCE_BASE_URL", "http://127.0.0.1:8000")
    _, _, env, cwd = start_ui(monkeypatch, "--port", str(free_port()))
    assert env["DAGSTER_HOME"] == cwd == str(tmp_path / "elsewhere")
    assert env["OABENCH_SOURCE_BASE_URL"] == "http://127.0.0.1:8000"


def test_ui_with_an_unusable_home_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DAGSTER_HOME", "relative/home")
    result = CliRunner().invoke(main, ["ui"])
    assert result.exit_code == 1
    assert result.output.strip() == "Error: DAGSTER_HOME 'relative/home' must be an absolute path"


def test_ui_on_a_port_in_use_exits_with_one_line_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`dg dev` would start its daemon (and launch runs) while its webserver only logged the clash."""
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setattr(os, "execve", lambda *_: pytest.fail("dg dev was started on a port in use"))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = CliRunner().invoke(main, ["ui", "--port", str(port)])
    assert result.exit_code == 1, result.output
    assert result.output.splitlines() == [
        f"Error: port {port} on 127.0.0.1 is already in use (another `oabench ui`?): stop what holds it or "
        "pick another with --port; nothing was started"
    ]

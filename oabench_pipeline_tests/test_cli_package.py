"""The `cli/` package keeps the command line's promises: its entry points, and a start that skips Dagster."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

from oabench_pipeline.cli import main


def test_console_script_is_the_packages_main() -> None:
    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "oabench"]
    assert script.value == "oabench_pipeline.cli:main"
    assert script.load() is main


def test_python_dash_m_runs_the_same_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "oabench_pipeline.cli", "--help"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: oabench ")
    for command in ("import", "ingest", "leaderboard", "run", "sql", "status"):
        assert f"\n  {command} " in result.stdout


def test_importing_the_commands_imports_no_dagster() -> None:
    """Dagster takes seconds to import: a command with nothing to do must not pay for it at start."""
    code = "import sys, oabench_pipeline.cli; print('dagster' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"

"""The `cli/` package keeps the command line's promises: its entry points, a start that skips Dagster, and a
wheel that holds the package alone."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import entry_points
from pathlib import Path

from oabench_pipeline.cli import main

ROOT = Path(__file__).resolve().parents[1]


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


def test_the_wheel_holds_the_package_alone_with_its_registry_and_templates(tmp_path: Path) -> None:
    """The wheel ships `oabench_pipeline` with its data files, and not the test package beside it (a pattern
    such as `oabench_pipeline*` matches both). Built from a copy of the checkout by setuptools' own PEP 517
    hook, without build isolation, so no download is needed."""
    source = tmp_path / "source"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("oabench_pipeline", "oabench_pipeline_tests"):
        shutil.copytree(ROOT / package, source / package, ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    build = "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))"
    result = subprocess.run(
        [sys.executable, "-c", build, str(tmp_path / "dist")],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    wheel = tmp_path / "dist" / result.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())

    assert not [n for n in names if n.startswith("oabench_pipeline_tests/")]
    assert {n.split("/")[0] for n in names if not n.startswith("oabench_pipeline-")} == {"oabench_pipeline"}
    package = ROOT / "oabench_pipeline"
    data = [
        *package.glob("registry/*.toml"),
        *package.glob("templates/**/*.html"),
        *package.glob("templates/**/*.css"),
    ]
    expected = {p.relative_to(ROOT).as_posix() for p in data}
    assert len(expected) > 10 and expected <= names, sorted(expected - names)
    assert "oabench_pipeline/cli/__init__.py" in names and "oabench_pipeline/core/__init__.py" in names

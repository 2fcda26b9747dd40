"""Fixtures shared by the whole suite: the real exam data beside the repo, and loopback servers."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oabench_pipeline_tests.servers.static_files import StaticFileServer

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_oab_dir() -> Path:
    """`../shared/oab` beside the repo (or `$OABENCH_SHARED_DIR/oab`): real PDFs and published runs, read-only."""
    base = Path(os.environ.get("OABENCH_SHARED_DIR", REPO_ROOT.parent / "shared"))
    return (base / "oab").resolve()


@pytest.fixture(scope="session")
def shared_oab() -> Path:
    path = shared_oab_dir()
    if not (path / "manifest.json").is_file():
        pytest.fail(f"real exam data not found at {path}: ../shared/oab must sit beside the repository")
    return path


@pytest.fixture(scope="session")
def manifest(shared_oab: Path) -> dict[str, Any]:
    return json.loads((shared_oab / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def mirror_server(shared_oab: Path) -> Iterator[StaticFileServer]:
    """`../shared/oab/mirror` served on 127.0.0.1: an offline stand-in for the official file host."""
    with StaticFileServer(shared_oab / "mirror") as server:
        yield server

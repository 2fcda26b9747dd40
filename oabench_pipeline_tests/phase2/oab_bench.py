"""OAB-Bench's real files beside the repository (`../shared/oab/mirror`), for the phase-2 tests."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from oabench_pipeline.core.phase2.sources import Phase2FileKind, load_phase2_sources
from oabench_pipeline_tests.conftest import shared_oab_dir

SOURCES = load_phase2_sources()
COMMIT = SOURCES.source.commit


def url_path(kind: Phase2FileKind) -> str:
    """The pinned URL's path: where the loopback mirror serves the file."""
    return urlsplit(SOURCES.file(kind).url).path


def mirror_file(kind: Phase2FileKind) -> Path:
    return shared_oab_dir() / "mirror" / url_path(kind).lstrip("/")


def oab_bench_folder() -> Path:
    """`data/oab_bench` at the pinned commit: what `oabench import` reads."""
    return shared_oab_dir() / "mirror" / "maritaca-ai" / "oab-bench" / COMMIT / "data" / "oab_bench"

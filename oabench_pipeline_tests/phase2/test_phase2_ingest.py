"""`oabench ingest --phase 2`: OAB-Bench's pinned files served on loopback, through Dagster, into the tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from oabench_pipeline.core.phase2.sources import PHASE2_FILE_KINDS
from oabench_pipeline_tests.phase2.oab_bench import SOURCES, mirror_file, url_path
from oabench_pipeline_tests.pipeline_env import make_env
from oabench_pipeline_tests.servers.static_files import Override, StaticFileServer


def test_ingest_downloads_verifies_and_parses_then_a_rerun_downloads_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mirror_server: StaticFileServer
) -> None:
    env = make_env(tmp_path, monkeypatch, mirror_server.base_url)
    before = {kind: mirror_server.requests[url_path(kind)] for kind in PHASE2_FILE_KINDS}
    result = env.cli("ingest", "--phase", "2")
    assert result.exit_code == 0, result.output
    assert "phase 2 edition 41: 35 items in 7 area-exams, 63 sub-item standards" in result.output
    assert {kind: mirror_server.requests[url_path(kind)] - before[kind] for kind in PHASE2_FILE_KINDS} == {
        kind: 1 for kind in PHASE2_FILE_KINDS
    }
    warehouse = env.warehouse
    counts = warehouse.query(
        "select count(*), count(distinct edition || area), sum(max_points) from phase2_items"
    ).row(0)
    assert counts == (105, 21, 210.0)
    assert warehouse.query("select count(*) from phase2_standards").item() == 189
    assert (
        warehouse.query("select count(*) from phase2_standards, unnest(criteria) as c(criterion)").item()
        == 512
    )
    assert set(warehouse.read("phase2_judge_prompts")["name"]) >= {
        "single-oab-v1",
        "single-oab-v1-multi-turn",
    }
    files = warehouse.read("phase2_source_files")
    assert dict(zip(files["kind"], files["sha256"], strict=True)) == {
        kind: SOURCES.file(kind).sha256 for kind in PHASE2_FILE_KINDS
    }
    assert set(warehouse.read("phase2_items")["source_url"]) == {SOURCES.file("questions").url}

    requests = sum(mirror_server.requests.values())
    rerun = env.cli("ingest", "--phase", "2")
    assert rerun.exit_code == 0, rerun.output
    assert rerun.output.count("(up to date)") == 3
    assert sum(mirror_server.requests.values()) == requests  # nothing downloaded


def test_a_file_whose_bytes_differ_from_its_pin_is_refused_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mirror_server: StaticFileServer
) -> None:
    env = make_env(tmp_path, monkeypatch, mirror_server.base_url)
    tampered = mirror_file("standards").read_bytes().replace(b"0,00/0,10", b"0,00/0,90", 1)
    mirror_server.overrides[url_path("standards")] = Override(body=tampered, content_type="text/plain")
    try:
        result = env.cli("ingest", "--phase", "2")
    finally:
        del mirror_server.overrides[url_path("standards")]
    assert result.exit_code == 1
    assert "phase 2 standards" in result.output and "SHA-256 mismatch" in result.output
    assert f"expected {SOURCES.file('standards').sha256}" in result.output
    assert not any(
        env.warehouse.has_table(t) for t in ("phase2_source_files", "phase2_items", "phase2_standards")
    )
    raw = env.settings.raw_dir
    assert not raw.exists() or all(p.name != SOURCES.file("standards").sha256 for p in raw.iterdir())

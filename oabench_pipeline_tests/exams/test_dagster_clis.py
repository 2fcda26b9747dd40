"""The stock Dagster command lines load the project and materialize exam partitions.

Each case is a real subprocess run from the repository root, as a user would type it, with the instance,
warehouse and source mirror pointed into a temporary folder. Every subprocess pays Dagster's import
time, so there are only a handful of them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from oabench_pipeline.core.analysis.table_checks import TABLE_CHECKS
from oabench_pipeline.core.editions import editions_by_key, load_editions
from oabench_pipeline.core.tables import ANALYSIS_TABLES
from oabench_pipeline_tests.conftest import REPO_ROOT
from oabench_pipeline_tests.pipeline_env import PipelineEnv, make_env
from oabench_pipeline_tests.servers.static_files import StaticFileServer

# Slow: the `dagster` and `dg` command lines as processes.
# Left out of the default run; `.ci/run` runs it after (`pytest -m slow`).
pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
SUBPROCESS_TIMEOUT_S = 300


def _env(root: Path, source_base_url: str) -> dict[str, str]:
    """The caller's environment, with every OABench/Dagster location moved under `root`."""
    home = root / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    # An instance file silences Dagster's "no dagster.yaml" warning and its telemetry banner.
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OABENCH_", "DAGSTER_"))}
    env.update(
        DAGSTER_HOME=str(home),
        OABENCH_WAREHOUSE=str(root / "warehouse" / "oabench.duckdb"),
        OABENCH_SOURCE_BASE_URL=source_base_url,
        # dg compares the active venv with the project's `.venv` (pyproject.toml silences its warning).
        VIRTUAL_ENV=str(BIN.parent),
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        NO_COLOR="1",
        COLUMNS="200",
    )
    return env


def _run(*args: str, env: dict[str, str], cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    """Run a venv command from `cwd` (the repository root); fail with its output if it does not exit 0."""
    done = subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def test_dagster_definitions_validate(tmp_path: Path, mirror_server: StaticFileServer) -> None:
    """`-m oabench_pipeline`: the project loads and its partition mappings are valid. (`-w workspace.yaml`
    loads the same module: `test_browser.py` starts the webserver with it and fails on a load error.)"""
    done = _run(
        "dagster", "definitions", "validate", "-m", "oabench_pipeline",
        env=_env(tmp_path, mirror_server.base_url),
    )  # fmt: skip
    assert "All code locations passed validation" in done.stdout + done.stderr


def test_dg_lists_the_project_definitions(tmp_path: Path, mirror_server: StaticFileServer) -> None:
    """`dg` finds the project from `[tool.dg]` in pyproject.toml; no other configuration is needed, and
    `.venv/bin/dg` run with no venv activated says nothing about a venv mismatch (it is the project's)."""
    env = _env(tmp_path, mirror_server.base_url)
    del env["VIRTUAL_ENV"]
    done = _run("dg", "list", "defs", "--json", env=env)
    assert "does not match" not in done.stderr
    listed = json.loads(done.stdout)

    groups = {a["asset_key"]: a["group_name"] for a in listed["assets"]}
    assert {k: groups.get(k) for k in ("editions", "exam_pdfs", "answer_keys", "questions")} == {
        "editions": "sources",
        "exam_pdfs": "sources",
        "answer_keys": "exams",
        "questions": "exams",
    }
    assert {"inferences", "scores", "leaderboard", "leaderboard_report"} <= groups.keys()
    checks = {c["key"] for c in listed["asset_checks"]}
    assert {
        "questions:booklet_edition_matches",
        "answer_keys:answer_key_covers_every_question",
        "exam_pdfs:stored_files_match_pins",
    } <= checks
    assert {"warehouse", "exam_sources"} <= {r["name"] for r in listed["resources"]}
    assert "oab_portal_sensor" in {s["name"] for s in listed["sensors"]}
    assert "weekly_portal_discovery" in {s["name"] for s in listed["schedules"]}


def test_oabench_and_dagster_share_one_instance_from_the_repository_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mirror_server: StaticFileServer
) -> None:
    """`oabench ingest` then `dagster asset materialize`, run where the repository's dagster.yaml is and with
    no DAGSTER_HOME exported (nor OABENCH_WAREHOUSE): the stock CLI finds the partition `oabench`
    registered, rewrites it with the same rows, downloads missing raw files from the mirror named in the
    environment, and both tools' runs are in `warehouse/dagster_home` (the folder the UI's `dagster dev`
    reads from there too). An exported DAGSTER_HOME: `test_dagster_asset_materialize_one_analysis_table`.

    The warehouse starts empty so that the ingest really runs (an up-to-date edition may be skipped).
    """
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copy(REPO_ROOT / "dagster.yaml", checkout / "dagster.yaml")
    pipeline = make_env(tmp_path, monkeypatch, mirror_server.base_url)
    monkeypatch.delenv("DAGSTER_HOME")
    monkeypatch.delenv(
        "OABENCH_WAREHOUSE"
    )  # the default, warehouse/oabench.duckdb under the working directory
    monkeypatch.chdir(checkout)
    # `oabench` in this process (what matters is the instance it picks, not its process); `dagster` as typed.
    result = pipeline.cli("ingest", "--editions", "44")
    assert result.exit_code == 0, result.output
    env = {k: v for k, v in _env(tmp_path, mirror_server.base_url).items() if k != "DAGSTER_HOME"}
    del env["OABENCH_WAREHOUSE"]

    def dagster_here(*args: str) -> None:
        _run("dagster", *args, env=env, cwd=checkout)

    warehouse = pipeline.warehouse
    assert warehouse.root == checkout / "warehouse"
    questions_file = warehouse.partition_path("questions", "44")
    rows_before = warehouse.read("questions", "44")
    inode_before = questions_file.stat().st_ino

    # With the raw files gone, the three exam assets in one run: `questions` is rewritten (an atomic
    # replace gives a new inode) with the same rows, and the PDFs come again from the mirror.
    edition = editions_by_key(load_editions())["44"]
    paths = {kind: "/" + edition.file(kind).url.split("/", 3)[3] for kind in ("booklet", "answer_key")}
    requests_before = {kind: mirror_server.requests[path] for kind, path in paths.items()}
    for kind in paths:
        (pipeline.settings.raw_dir / edition.file(kind).sha256).unlink()
    dagster_here(
        *("asset", "materialize", "-m", "oabench_pipeline", "--select", "exam_pdfs,answer_keys,questions"),
        *("--partition", "44"),
        # One process for the three steps, whatever the instance's default executor.
        *("--config-json", json.dumps({"execution": {"config": {"in_process": {}}}})),
    )

    assert questions_file.stat().st_ino != inode_before
    assert warehouse.read("questions", "44").equals(rows_before)
    assert {k: mirror_server.requests[p] - requests_before[k] for k, p in paths.items()} == {
        "booklet": 1,
        "answer_key": 1,
    }
    for kind in paths:
        assert (pipeline.settings.raw_dir / edition.file(kind).sha256).is_file()

    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    home = checkout / "warehouse" / "dagster_home"
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        runs = instance.get_runs()
        assert {r.tags.get("dagster/partition") for r in runs} >= {"44"}
        assert "__ASSET_JOB" in {r.job_name for r in runs}  # the dagster CLI's run
        # oabench's runs, under the definitions' jobs that say what they are (never `__ephemeral_asset_job__`)
        assert {"ingest_edition", "refresh_editions_table"} <= {r.job_name for r in runs}
        assert "__ephemeral_asset_job__" not in {r.job_name for r in runs}
    assert not list(checkout.glob(".tmp_dagster_home_*"))  # the temporary home is removed on exit


def test_dagster_asset_materialize_one_analysis_table(
    fresh_env: PipelineEnv, mirror_server: StaticFileServer
) -> None:
    """`dagster asset materialize --select pairwise_comparison`: the one table is rebuilt, with its checks,
    and no other table is touched (each analysis table is its own asset of one subsettable step)."""
    result = fresh_env.cli("run", "--models", "baseline/random,baseline/longest-choice")
    assert result.exit_code == 0, result.output
    warehouse = fresh_env.warehouse
    files = {table: warehouse.partition_path(table) for table in ANALYSIS_TABLES}
    before = {table: (path.stat().st_ino, path.stat().st_mtime_ns) for table, path in files.items()}
    pairs_before = warehouse.read("pairwise_comparison")
    assert pairs_before.height == 1  # the two baselines, both complete and ranked

    _run(
        "dagster", "asset", "materialize", "-m", "oabench_pipeline", "--select", "pairwise_comparison",
        env=_env(fresh_env.root, mirror_server.base_url),
    )  # fmt: skip

    after = {table: (path.stat().st_ino, path.stat().st_mtime_ns) for table, path in files.items()}
    assert [t for t in ANALYSIS_TABLES if after[t] != before[t]] == ["pairwise_comparison"]
    assert warehouse.read("pairwise_comparison").equals(pairs_before)

    from dagster import DagsterEventType, DagsterInstance

    with DagsterInstance.get() as instance:  # the instance `oabench` and the dagster CLI share
        [run] = instance.get_runs(limit=1)
        assert run.job_name == "__ASSET_JOB"
        events = instance.all_logs(run.run_id)
    materialized = [
        e.dagster_event.asset_key.to_user_string()
        for e in events
        if e.dagster_event and e.dagster_event.event_type == DagsterEventType.ASSET_MATERIALIZATION
    ]
    assert materialized == ["pairwise_comparison"]
    evaluations = {
        (e.dagster_event.event_specific_data.check_name, e.dagster_event.event_specific_data.passed)
        for e in events
        if e.dagster_event and e.dagster_event.event_type == DagsterEventType.ASSET_CHECK_EVALUATION
    }
    assert evaluations == {(name, True) for name in TABLE_CHECKS["pairwise_comparison"]}

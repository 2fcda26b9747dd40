"""`oabench status` through a cell's life: missing, priced, complete, stale, failed, and history keys.

Real warehouse (the ingested real editions), the real CLI, and a loopback OpenAI-compatible server that
lists a price and answers every question; the cells are run with `oabench run` like a user would (edition
43's cells once per module: one it re-scores, two whose endpoints fail them, beside one answered in process
before it; each test starting from a copy of that warehouse and instance).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from click.testing import Result
from dagster import DagsterRunStatus, RunsFilter

from oabench_pipeline.core.models_registry import load_models_registry
from oabench_pipeline.definitions import build_definitions
from oabench_pipeline.engine.runs import ensure_partitions, instance_for, instance_home, run_assets
from oabench_pipeline.engine.status import read_cells, select_cells
from oabench_pipeline.inference.cell import build_requests
from oabench_pipeline.inference.cost import estimated_prompt_tokens
from oabench_pipeline.shared.partitions import cell_partition_key
from oabench_pipeline.warehouse import DamagedPartitionError, Warehouse
from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file
from oabench_pipeline_tests.saved_envs import SavedEnv, building_env, save_env
from oabench_pipeline_tests.servers.openai_replay import FaultProfile, ModelPricing, ReplayServer
from oabench_pipeline_tests.servers.static_files import StaticFileServer

API_MODEL = "test/model"
PROMPT_PRICE = "0.000002"  # USD per prompt token
BASELINE = "baseline/random"
ACTIVE_43 = 78  # 80 questions, 2 annulled (1 and 74)
ACTIVE_44 = 80
# The two cells of edition 43 the module's `oabench run` fails (beside the two it completes): one whose
# endpoint answers HTTP 402 ("no credits": a fatal error) to everything, one whose endpoint refuses every
# connection (a loopback port nothing listens on).
NO_CREDITS = "test/no-credits"
REFUSED = "test/refused"


@dataclass
class StatusEnv:
    env: PipelineEnv
    server: ReplayServer

    def registry(
        self,
        *,
        with_baseline: bool = True,
        base_url: str | None = None,
        more: Sequence[tuple[str, str]] = (),
        **api: object,
    ) -> None:
        """A registry of the baseline (unless `with_baseline` is false) and API_MODEL (on `base_url`, else
        the module's server; `api` adds fields), then one API entry per (key, base_url) of `more`."""
        entries: list[dict] = [{"id": BASELINE, "kind": "baseline"}] if with_baseline else []
        entries.append(_api_entry(API_MODEL, base_url or self.server.base_url) | api)
        entries += [_api_entry(key, url) for key, url in more]
        self.env.set("OABENCH_MODELS_FILE", write_models_file(self.env.root / "models.toml", entries))

    def status(self, *args: str) -> tuple[Result, dict[tuple[str, str], dict]]:
        result = self.env.cli("status", "--format", "json", *args)
        data = json.loads(result.output)
        assert data["complete"] == (result.exit_code == 0)
        return result, {(c["edition"], c["model_key"]): c for c in data["cells"]}


@pytest.fixture(scope="module")
def status_server() -> Iterator[ReplayServer]:
    with ReplayServer(models={API_MODEL: ModelPricing(PROMPT_PRICE, "0")}) as server:
        yield server


def _api_entry(key: str, base_url: str) -> dict:
    return {"id": key, "key": key, "base_url": base_url, "api_key_env": ""}


def _refused_url() -> str:
    """A loopback base_url nothing listens on: every connection is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@dataclass
class Ran43:
    """The module's `oabench run --editions 43`: the environment it left, what it printed, and the
    endpoints of the two cells it failed (NO_CREDITS's server is gone once the module's run ended)."""

    saved: SavedEnv
    run: Result
    no_credits_url: str
    refused_url: str
    torn: TornScores


@dataclass
class TornScores:
    """BASELINE × 43 before the module's `oabench run`: `oabench status` of it answered and scored (by
    in-process runs), then of it with its scores file torn, which that run re-scores."""

    scored: dict
    torn_result: Result
    torn: dict


@pytest.fixture(scope="module")
def ran_43(
    tmp_path_factory: pytest.TempPathFactory,
    ingested_template: Path,
    mirror_server: StaticFileServer,
    status_server: ReplayServer,
) -> Ran43:
    """Edition 43 run once with `oabench run` (no price snapshot yet), each test getting a copy: the
    baseline's cell (answered and scored in process, its scores then torn: `_scored_then_torn`) is
    re-scored, NO_CREDITS's and REFUSED's fail (one run for the three cells; the failures and the re-scoring
    were three more runs in the tests that read them). API_MODEL's cell, which the tests need complete but
    whose making they do not test, is answered and scored in process before it (`_answered_in_process`):
    the command finds it complete, and launches no run for it. The registry is then put back to the baseline
    and API_MODEL, the two complete cells."""
    with (
        building_env(tmp_path_factory, "status", ingested_template, mirror_server.base_url) as env,
        ReplayServer(faults=FaultProfile(fixed_status=402)) as broke,
    ):
        status_env, refused_url = StatusEnv(env, status_server), _refused_url()
        status_env.registry(more=[(NO_CREDITS, broke.base_url), (REFUSED, refused_url)])
        _answered_in_process(env, API_MODEL)
        torn = _scored_then_torn(status_env)
        result = env.cli("run", "--editions", "43")
        assert result.exit_code == 1, result.output
        status_env.registry()
        return Ran43(save_env(env, "OABENCH_MODELS_FILE"), result, broke.base_url, refused_url, torn)


def _answered_in_process(env: PipelineEnv, model_key: str) -> None:
    """`model_key`'s cell of 43 answered and scored by the assets' in-process run (what `oabench run`'s
    launched run of the cell does)."""
    settings = env.settings
    with instance_for(settings) as instance:
        ensure_partitions(instance, "editions", ["43"])
        ensure_partitions(instance, "model_keys", [model_key])
        cell = cell_partition_key(model_key, "43")
        outcome = run_assets(
            build_definitions(settings), instance, ["inferences", "scores"], partition_key=cell
        )
        assert outcome.success, outcome.errors


def _scored_then_torn(status_env: StatusEnv) -> TornScores:
    """BASELINE × 43 answered and scored by the assets' in-process runs (the state the module's `oabench run`
    re-scores; how it was made is not what the module tests), then its scores file torn (its footer: the
    damage a crash leaves), with `oabench status` of the cell at each step."""
    env = status_env.env
    _answered_in_process(env, BASELINE)
    _, scored = status_env.status("--editions", "43", "--models", BASELINE)
    scores = env.warehouse.partition_path("scores", f"43|{BASELINE}")
    scores.write_bytes(scores.read_bytes()[:-100])  # a torn footer
    torn_result, torn = status_env.status("--editions", "43", "--models", BASELINE)
    return TornScores(scored[("43", BASELINE)], torn_result, torn[("43", BASELINE)])


@pytest.fixture
def status_env(ran_43: Ran43, status_server: ReplayServer, monkeypatch: pytest.MonkeyPatch) -> StatusEnv:
    return StatusEnv(ran_43.saved.restore(monkeypatch), status_server)


def _prompt_cost(env: PipelineEnv, edition: str) -> float:
    [model] = [m for m in load_models_registry(env.settings.models_file) if m.key == API_MODEL]
    requests = build_requests(model, env.warehouse.read("questions", edition))
    return estimated_prompt_tokens([r.body for r in requests]) * float(PROMPT_PRICE)


def test_status_follows_cells_from_missing_to_complete_to_stale(status_env: StatusEnv) -> None:
    """A cell never run (44) is missing; both cells of 43 (the module's) are complete until their
    configuration changes, and stay complete when their edition is re-parsed into the same rows."""
    env = status_env.env
    result, cells = status_env.status("--editions", "44")
    assert result.exit_code == 1
    assert set(cells) == {("44", BASELINE), ("44", API_MODEL)}
    api = cells[("44", API_MODEL)]
    assert (api["state"], api["answered"], api["missing"], api["to_send"]) == (
        "missing",
        0,
        ACTIVE_44,
        ACTIVE_44,
    )
    assert api["est_cost_usd"] is None  # no price snapshot yet
    assert cells[("44", BASELINE)]["est_cost_usd"] == 0.0

    # A price snapshot (from the loopback endpoint's model list) gives the estimate.
    settings = env.settings
    with instance_for(settings) as instance:
        assert run_assets(build_definitions(settings), instance, ["model_pricing"]).success
    _, cells = status_env.status("--editions", "44")
    assert cells[("44", API_MODEL)]["est_cost_usd"] == pytest.approx(_prompt_cost(env, "44"))

    result, cells = status_env.status("--editions", "43")  # answered and scored by the module's fixture
    assert result.exit_code == 0
    assert set(cells) == {("43", BASELINE), ("43", API_MODEL)}
    for cell in cells.values():
        assert (cell["state"], cell["answered"], cell["errors"], cell["missing"]) == (
            "complete",
            ACTIVE_43,
            0,
            0,
        )
        assert (cell["to_send"], cell["est_cost_usd"]) == (0, 0.0)
    table = env.cli("status", "--editions", "43")
    assert table.exit_code == 0 and "2 cell(s): 2 complete" in table.output

    # Changing the configuration changes every request: stale, and everything would be sent again.
    status_env.registry(reasoning_effort="low")
    _, cells = status_env.status("--editions", "43", "--models", API_MODEL)
    api = cells[("43", API_MODEL)]
    assert api["state"] == "stale" and f"{ACTIVE_43} request hash(es) differ" in api["reason"]
    assert api["to_send"] == ACTIVE_43
    status_env.registry()  # the configuration the cells were run with: complete again
    result, _ = status_env.status("--editions", "43")
    assert result.exit_code == 0

    # Re-materializing the edition rewrites its questions and answer key with the same rows (the same data
    # versions): nothing the cells were built from changed, so they stay complete.
    with instance_for(settings) as instance:
        assert run_assets(
            build_definitions(settings),
            instance,
            ["exam_pdfs", "answer_keys", "questions"],
            partition_key="43",
        ).success
    result, cells = status_env.status("--editions", "43")
    assert result.exit_code == 0, cells
    assert {c["state"] for c in cells.values()} == {"complete"}


def test_a_failed_run_and_a_key_that_left_the_registry(status_env: StatusEnv, ran_43: Ran43) -> None:
    """A cell whose last run failed (NO_CREDITS × 43: its endpoint said 402, "no credits", a fatal error) is
    `failed`; API_MODEL's cell stays complete with its entry pointed at that endpoint; the baseline, out of
    the registry, keeps its existing cell as history and gets no new one."""
    assert ran_43.run.exit_code == 1  # the module's `oabench run` of 43: NO_CREDITS's cell failed
    status_env.registry(
        with_baseline=False, base_url=ran_43.no_credits_url, more=[(NO_CREDITS, ran_43.no_credits_url)]
    )
    result, cells = status_env.status("--editions", "43,44")
    assert result.exit_code == 1
    failed = cells[("43", NO_CREDITS)]
    assert failed["state"] == "failed" and "last run failed" in failed["reason"]
    assert cells[("43", API_MODEL)]["state"] == "complete"
    # The baseline left the registry: its existing cell is listed as history, no new cell for it.
    history = cells[("43", BASELINE)]
    assert history["state"] == "complete" and "not in the models registry" in history["reason"]
    assert history["to_send"] is None and ("44", BASELINE) not in cells


def test_a_failed_cell_keeps_the_one_line_reason_its_run_printed(
    status_env: StatusEnv, ran_43: Ran43
) -> None:
    """`oabench run` says why a cell failed (REFUSED × 43: every connection refused, in the module's run);
    `oabench status` says the same afterwards, from the instance."""
    run = ran_43.run
    assert run.exit_code == 1
    host = ran_43.refused_url.split("/")[2]
    printed = f"connection refused by {host} 4 times; is the server running and base_url right?"
    assert printed in run.output
    status_env.registry(with_baseline=False, more=[(REFUSED, ran_43.refused_url)])
    _, cells = status_env.status("--editions", "43")
    failed = cells[("43", REFUSED)]
    assert failed["state"] == "failed"
    assert failed["reason"].startswith("last run failed before writing any row: ")
    assert printed in failed["reason"]
    assert failed["reason"].endswith(f"`oabench run --models {REFUSED} --editions 43` runs it again")


@pytest.mark.slow  # `dagster job launch`, a process loading the definitions
def test_a_run_left_in_the_run_queue_is_queued_not_running(status_env: StatusEnv) -> None:
    """What an `oabench ui` that stopped leaves behind: a cell run submitted to the run queue that no daemon
    started. Only a live process holding the cell makes it `running` (docs/reliability.md)."""
    env = status_env.env
    settings = env.settings
    key = str(cell_partition_key(API_MODEL, "44"))
    with instance_for(settings) as instance:
        ensure_partitions(instance, "editions", ["44"])
    tags = {"dagster/partition": key, "dagster/partition/edition": "44", "dagster/partition/model": API_MODEL}
    dagster = str(Path(sys.executable).with_name("dagster"))
    launched = subprocess.run(  # the instance's run coordinator queues it; no daemon runs here
        [
            dagster,
            "job",
            "launch",
            "-m",
            "oabench_pipeline",
            "-j",
            "run_inference_cell",
            "--tags",
            json.dumps(tags),
        ],
        env={**os.environ, "DAGSTER_HOME": str(instance_home(settings)[0])},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert launched.returncode == 0, launched.stderr
    with instance_for(settings) as instance:
        [run] = instance.get_runs(RunsFilter(tags={"dagster/partition": key}))
        assert run.status == DagsterRunStatus.QUEUED
    result, cells = status_env.status("--editions", "44", "--models", API_MODEL)
    queued = cells[("44", API_MODEL)]
    assert queued["state"] == "queued", queued
    assert "waits in the Dagster run queue" in queued["reason"]
    assert queued["reason"].endswith(
        f"`oabench run --models {API_MODEL} --editions 44` answers it now instead"
    )
    assert json.loads(result.output)["counts"]["queued"] == 1


def test_a_bad_registry_is_the_registry_s_one_line(status_env: StatusEnv) -> None:
    """`oabench status` (like `oabench run`) says what is wrong with the registry in one line, no traceback:
    here the cloud metadata address, which a registry entry may use only with `allow_private_network`."""
    env = status_env.env
    status_env.registry(base_url="http://169.254.169.254/latest")
    registry = env.root / "models.toml"
    for command in (("status",), ("run", "--editions", "43")):
        result = env.cli(*command)
        assert result.exit_code == 1
        assert result.output.splitlines() == [
            f"Error: {registry}:8: field 'base_url': 'http://169.254.169.254/latest' is 169.254.169.254, a "
            "link-local address (169.254.0.0/16, where cloud instance metadata services listen); refused "
            "unless `allow_private_network = true` is set on this entry"
        ], command
    registry.write_text(registry.read_text().replace('id = "test', "id = test"))  # a TOML syntax error
    result = env.cli("status")
    assert result.exit_code == 1 and len(result.output.splitlines()) == 1 and "Traceback" not in result.output
    assert result.output.startswith(f"Error: {registry}:6: field 'id': TOML syntax error")


def test_select_cells_crosses_the_registry_and_keeps_only_existing_history() -> None:
    cells = select_cells(
        editions=["43", "44"],
        registry=["a"],
        history=[("43", "a"), ("43", "gone"), ("45", "gone")],
        only_editions=["43", "45"],
    )
    assert cells == [("43", "a"), ("43", "gone"), ("45", "gone")]
    assert select_cells(["43"], ["a", "b"], [], only_models=["b"]) == [("43", "b")]


def test_an_edition_s_cells_are_read_at_once_unless_a_file_is_damaged(tmp_path: Path) -> None:
    """`status` reads an edition's `inferences` partitions in one read: each cell's rows as its own read
    gives them (without the reasoning); a damaged file among them leaves each cell to its own read, which
    reports the damage."""
    store = Warehouse(tmp_path / "warehouse" / "oabench.duckdb")
    keys = [str(cell_partition_key(model, "43")) for model in ("a/one", "b/two:free", "c/never-run")]
    for count, key in enumerate(keys[:2], start=2):
        rows = {
            "qid": [f"43-{n}" for n in range(count)],
            "reasoning": ["why"] * count,
            "source": ["live"] * count,
        }
        store.write_partition("inferences", pl.DataFrame(rows), key)
    store.write_partition("inferences", pl.DataFrame({"qid": []}, schema={"qid": pl.String}), "44|a/one")
    read = read_cells(store, [*keys, "44|a/one"])
    assert set(read) == {*keys[:2], "44|a/one"}  # a cell with no partition is left to its own read
    for key in [*keys[:2], "44|a/one"]:
        alone = store.read("inferences", key).drop("reasoning")
        assert read[key].equals(alone) and read[key].schema == alone.schema
    damaged = store.partition_path("inferences", keys[1])
    damaged.write_bytes(damaged.read_bytes()[:-30])
    assert read_cells(store, keys) == {}
    with pytest.raises(DamagedPartitionError):
        store.read("inferences", keys[1])


def test_unreadable_or_older_scores_make_a_cell_stale_until_run_rescores_it(
    status_env: StatusEnv, ran_43: Ran43
) -> None:
    """One notion of done: the cell `oabench run` would re-score is not `complete` in `oabench status`
    (BASELINE × 43 before the module's `oabench run`, which re-scored it: `_scored_then_torn`)."""
    torn = ran_43.torn
    assert torn.scored["state"] == "complete"  # answered and scored, in process

    assert torn.torn_result.exit_code == 1
    assert (
        torn.torn["state"] == "stale"
        and "scores older than the answers, or unreadable" in torn.torn["reason"]
    )

    rerun = ran_43.run
    assert rerun.exit_code == 1, rerun.output  # NO_CREDITS's and REFUSED's cells failed
    assert "re-scoring it" in rerun.output
    # The baseline's cell succeeded (re-scored, no model call); only the two others are left to rerun.
    assert f"{BASELINE} × 43: answers up to date, re-scored" in rerun.output
    failed = rerun.output.split(" not complete ", 1)[1]
    assert failed.startswith(f"(rerun `oabench run --models {NO_CREDITS},{REFUSED} --editions 43` ")
    assert BASELINE not in failed, rerun.output
    _, cells = status_env.status("--editions", "43", "--models", BASELINE)
    assert cells[("43", BASELINE)]["state"] == "complete"


@pytest.mark.slow  # real `oabench` processes: what a terminal shows, Dagster's own loggers included
def test_postgres_down_is_one_line_and_status_still_shows_the_warehouse(
    status_env: StatusEnv, tmp_path: Path
) -> None:
    """docs/scaling.md's PostgreSQL instance with no server listening: each command says so in one line,
    not dagster-postgres's retry warnings, and `oabench status` still reports the cells from the warehouse."""
    from oabench_pipeline_tests.test_postgres_instance import documented_instance_yaml

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    home = tmp_path / "postgres_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(documented_instance_yaml(), encoding="utf-8")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        **{f"DAGSTER_PG_{k}": v for k, v in {"HOST": "127.0.0.1", "PORT": str(port)}.items()},
        **{f"DAGSTER_PG_{k}": "dagster" for k in ("USER", "PASSWORD", "DB")},
    }
    oabench = [sys.executable, "-m", "oabench_pipeline.cli"]

    def oabench_run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*oabench, *args], env=env, capture_output=True, text=True, timeout=300)

    status = oabench_run("status", "--editions", "43", "--format", "json")
    assert status.stderr.count("\n") == 1, status.stderr
    assert "cannot open the Dagster instance" in status.stderr
    cells = {cell["model_key"]: cell for cell in json.loads(status.stdout)["cells"]}
    assert cells[BASELINE]["state"] == "complete" and cells[API_MODEL]["answered"] == ACTIVE_43, cells

    run = oabench_run("run", "--editions", "43", "--force")
    assert run.returncode == 1
    assert run.stderr.count("\n") == 1 and "cannot open the Dagster instance" in run.stderr, run.stderr

"""`oabench run` options end to end: --dry-run, --concurrency, offline baselines, bad --editions, --suite (with
`oabench leaderboard --suite` and `oabench status --suite`): the packaged registry knows only the study's three
editions, so the suites add made-up ones (`more_editions.py`: a registry through OABENCH_EDITIONS_FILE, exam
tables copied from edition 45)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import socket
from pathlib import Path

import polars as pl
import pytest

from oabench_pipeline.core.editions import (
    DEFAULT_EDITIONS_FILE,
    DEFAULT_SUITE,
    format_editions,
    load_editions,
    load_suites,
)
from oabench_pipeline.core.scoring import SCORING_VERSION
from oabench_pipeline.core.tables import empty_frame
from oabench_pipeline.core.versions import ANALYSIS_VERSION
from oabench_pipeline.definitions import build_definitions
from oabench_pipeline.engine.launch import CODE_SERVER_LOG
from oabench_pipeline.engine.runs import instance_for, run_assets
from oabench_pipeline.engine.stale_runs import LAUNCHER_PID_TAG
from oabench_pipeline.inference.cell import plan_cell
from oabench_pipeline.inference.cost import estimated_prompt_tokens
from oabench_pipeline.settings import Settings
from oabench_pipeline.shared.run_tags import PID_TAG
from oabench_pipeline_tests.inference.replay import TEST_KEY, TEST_KEY_ENV
from oabench_pipeline_tests.more_editions import register_more_editions
from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file
from oabench_pipeline_tests.saved_envs import fresh_env_with_instance_per_module
from oabench_pipeline_tests.servers.openai_replay import ModelPricing, ReplayServer

PROMPT_PRICE = 0.000002  # USD per token, as OpenRouter lists it


ingested_with_instance, fresh_env = fresh_env_with_instance_per_module("cli-run")


def use_models(env: PipelineEnv, entries: list[dict]) -> None:
    env.set(TEST_KEY_ENV, TEST_KEY)
    env.set("OABENCH_MODELS_FILE", write_models_file(env.root / "models.toml", entries))


def expected_prompt_cost(env: PipelineEnv, model_key: str, edition: str) -> float:
    from oabench_pipeline.core.models_registry import load_models_registry

    model = next(m for m in load_models_registry(Settings.from_env().models_file) if m.key == model_key)
    plan = plan_cell(model, env.warehouse.read("questions", edition), {}, empty_frame("inferences"))
    return estimated_prompt_tokens([r.body for r in plan.pending]) * PROMPT_PRICE


def test_dry_run_prints_calls_and_cost_and_sends_nothing(fresh_env: PipelineEnv) -> None:
    priced, unpriced = "acme/priced", "acme/unpriced"
    with ReplayServer(
        models={priced: ModelPricing(f"{PROMPT_PRICE}", "0.00001")}, api_key=TEST_KEY
    ) as server:
        base = {"base_url": server.base_url, "api_key_env": TEST_KEY_ENV}
        use_models(fresh_env, [{"id": priced, **base}, {"id": unpriced, **base}])
        settings = fresh_env.settings
        with instance_for(settings) as instance:
            assert run_assets(build_definitions(settings), instance, ["model_pricing"]).success
        before = server.stats.model_list_requests

        result = fresh_env.cli("run", "--editions", "44,45", "--dry-run")
        assert result.exit_code == 0, result.output
        assert server.stats.total_requests == 0
        assert server.stats.model_list_requests == before

    lines = result.output.splitlines()
    for edition in ("44", "45"):
        cost = expected_prompt_cost(fresh_env, priced, edition)
        assert cost > 0.01, "80 questions of legal Portuguese are tens of thousands of tokens"
        assert f"{priced} × {edition}: 80 call(s), est. prompt cost ${cost:.4f}" in lines
        assert f"{unpriced} × {edition}: 80 call(s), est. prompt cost unknown (no price snapshot)" in lines
    assert f"{unpriced}: 2 edition(s), 160 call(s), est. prompt cost unknown (no price snapshot)" in lines
    known = sum(expected_prompt_cost(fresh_env, priced, e) for e in ("44", "45"))
    # The unknown part is never summed as $0: the total says it has one.
    assert (
        f"total: 320 call(s), est. prompt cost ${known:.4f} + unknown for {unpriced} (prompt tokens × listed price)"
        in lines
    )
    assert "$0.0000" not in result.output
    assert (
        f"no price snapshot for {unpriced}: `dg launch --assets model_catalogue,model_pricing` (from the "
        "repository root) takes one" in lines
    )
    assert not fresh_env.warehouse.has_table("inferences")
    assert not (settings.warehouse_path.parent / "responses").exists()


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any outgoing connection fails loudly (the loopback mirror is not needed: editions are ingested)."""

    def refuse(sock: socket.socket, address: object) -> None:
        raise AssertionError(f"network access attempted: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


BASELINES = ["baseline/random", "baseline/longest-choice"]


@pytest.mark.slow
def test_baselines_run_offline_on_a_suite_and_every_suite_prints_in_every_format(
    fresh_env: PipelineEnv, no_network: None
) -> None:
    """Both baselines on suite `late` (a made-up 1st edition and the 45th): ranked there; shown unranked
    in the study's table (they ran one edition of three) and in `all`; the default views as before."""
    for name in ("OPENROUTER_API_KEY", "OABENCH_MODELS_FILE"):
        fresh_env.monkeypatch.delenv(name, raising=False)  # the packaged registry's models, no key at all
    register_more_editions(fresh_env, [1], {"late": [1, 45]})
    result = fresh_env.cli("run", "--models", ",".join(BASELINES), "--suite", "late")
    assert result.exit_code == 0, result.output
    assert "leaderboard rebuilt: 2 model key(s) × 2 edition(s), 4 cell(s) run" in result.output
    # No model call: the total says what the cells did, not "0/0 answered".
    assert (
        "total: 4 cell(s): answered offline (baseline), scored; 0 cell(s) in flight, 4 done" in result.output
    )
    assert "0/0" not in result.output
    with instance_for(fresh_env.settings) as instance:  # the UI's Runs page: each run's job says what it is
        runs = instance.get_runs()
    jobs = {(r.job_name, r.tags.get("dagster/partition")) for r in runs}
    cells = {(f"{edition}|{key}") for edition in (1, 45) for key in BASELINES}
    assert {("oabench_cell", cell) for cell in cells} | {("rebuild_leaderboard", None)} <= jobs
    assert not {job for job, _ in jobs if job.startswith("__")}
    # A baseline calls no model: its cells ran in the command's process (here, the test's), none launched,
    # and no code server was started for them.
    cell_runs = [r for r in runs if r.job_name == "oabench_cell"]
    assert {r.tags.get(PID_TAG) for r in cell_runs} == {str(os.getpid())}
    assert not [r for r in cell_runs if LAUNCHER_PID_TAG in r.tags]
    assert not (fresh_env.warehouse.root / CODE_SERVER_LOG).exists()

    table = fresh_env.cli("leaderboard")
    assert table.exit_code == 0 and all(key in table.output for key in BASELINES)

    as_csv = list(csv.DictReader(io.StringIO(fresh_env.cli("leaderboard", "--format", "csv").output)))
    assert sorted(row["model_key"] for row in as_csv) == sorted(BASELINES)
    as_json = json.loads(fresh_env.cli("leaderboard", "--format", "json").output)
    assert sorted(row["model_key"] for row in as_json) == sorted(BASELINES)
    ranked = {row["model_key"]: int(row["official_score"]) for row in as_json}
    assert all(0 <= score <= 80 for score in ranked.values())
    assert {row["model_key"]: int(row["official_score"]) for row in as_csv} == ranked
    markdown = fresh_env.cli("leaderboard", "--format", "markdown").output.splitlines()
    assert markdown[0].startswith("|") and set(markdown[1]) <= set("|-: ")
    assert len([line for line in markdown if line.startswith("|")]) == 2 + len(BASELINES)

    by_edition = json.loads(fresh_env.cli("leaderboard", "--by", "edition", "--format", "json").output)
    assert sorted((row["model_key"], int(row["edition"])) for row in by_edition) == sorted(
        (key, 45) for key in BASELINES
    )
    by_area = pl.DataFrame(
        json.loads(fresh_env.cli("leaderboard", "--by", "area", "--format", "json").output)
    )
    totals = by_area.group_by("model_key").agg(pl.col("total").sum()).sort("model_key")
    assert totals.rows() == sorted((key, 80) for key in BASELINES)
    area_table = fresh_env.cli("leaderboard", "--by", "area")
    assert area_table.exit_code == 0 and "area" in area_table.output

    def board(*args: str) -> dict[str, tuple]:
        rows = json.loads(fresh_env.cli("leaderboard", "--format", "json", *args).stdout)
        return {
            r["model_key"]: (r["rank"] is not None, r["official_total"], r["editions_total"]) for r in rows
        }

    assert board() == board("--suite", DEFAULT_SUITE) == {key: (False, 80, 3) for key in BASELINES}
    assert board("--suite", "late") == {key: (True, 160, 2) for key in BASELINES}
    assert board("--suite", "all") == {key: (False, 160, 4) for key in BASELINES}
    late = fresh_env.cli("leaderboard", "--suite", "late").stdout.splitlines()
    assert late[-1] == "Suite late: editions 1,45, 160 questions; 2 of 2 model key(s) ranked"
    default = fresh_env.cli("leaderboard").stdout.splitlines()
    assert default[-2].startswith(f"* incomplete in suite {DEFAULT_SUITE}: an edition of it not run")
    assert default[-1] == f"Suite {DEFAULT_SUITE}: editions 43-45, 240 questions; 0 of 2 model key(s) ranked"
    late_editions = json.loads(
        fresh_env.cli("leaderboard", "--suite", "late", "--by", "edition", "--format", "json").stdout
    )
    assert sorted({r["edition"] for r in late_editions}) == [1, 45]
    sql = "select suite, count(rank) as ranked from leaderboard_by_suite group by suite order by suite"
    assert json.loads(fresh_env.cli("sql", sql, "--format", "json").stdout) == [
        {"suite": "all", "ranked": 0},
        {"suite": "late", "ranked": 2},
        {"suite": DEFAULT_SUITE, "ranked": 0},
    ]
    status = fresh_env.cli("status", "--suite", "late", "--models", ",".join(BASELINES))
    assert status.exit_code == 0, status.output  # the same test `oabench run` passed on each cell
    assert status.output.splitlines()[-1] == (
        f"suite late (editions 1,45): 2 of 2 model key(s) complete on every edition ({', '.join(sorted(BASELINES))})"
    )
    everything = fresh_env.cli("status", "--suite", "all", "--models", BASELINES[0], "--format", "json")
    assert everything.exit_code == 1  # editions 43 and 44 never ran
    assert json.loads(everything.stdout)["suite"] == {
        "name": "all",
        "editions": [1, 43, 44, 45],
        "complete_keys": [],
        "model_keys": [BASELINES[0]],
    }
    again = fresh_env.cli("run", "--models", ",".join(BASELINES), "--suite", "late")
    assert "up to date: 4 cell(s) answered and scored, leaderboard current" in again.output

    # Files an older release wrote (no code version in them, or another one): rebuilt once, nothing more.
    store = fresh_env.warehouse
    older = store.read("scores", f"45|{BASELINES[0]}")
    store.write_partition("scores", older, f"45|{BASELINES[0]}")
    store.write_partition(
        "contamination_by_cutoff", store.read("contamination_by_cutoff"), version="analysis-1"
    )
    assert store.written_version("leaderboard") is not None
    upgraded = fresh_env.cli("run", "--models", ",".join(BASELINES), "--suite", "late")
    assert "leaderboard rebuilt: 2 model key(s) × 2 edition(s), 1 cell(s) run" in upgraded.output
    with instance_for(fresh_env.settings) as instance:  # scores alone: the cell's scoring job
        rescored = instance.get_runs(limit=3)
    assert [r.job_name for r in rescored if r.tags.get("dagster/partition")] == ["score_cell"]
    assert store.written_version("scores", f"45|{BASELINES[0]}") == SCORING_VERSION
    assert store.written_version("contamination_by_cutoff") == ANALYSIS_VERSION
    assert "up to date" in fresh_env.cli("run", "--models", ",".join(BASELINES), "--suite", "late").output


def test_edition_not_ingested_is_a_usage_error(fresh_env: PipelineEnv) -> None:
    fresh_env.monkeypatch.delenv("OABENCH_MODELS_FILE", raising=False)
    result = fresh_env.cli("run", "--models", "baseline/random", "--editions", "45,46")
    assert result.exit_code == 2, result.output
    assert "edition(s) 46 not ingested" in result.output
    assert "oabench ingest --editions 46" in result.output
    assert not fresh_env.warehouse.has_table("inferences")


@pytest.mark.slow
def test_concurrency_option_then_replicates_ask_again_once_and_replicate_one_is_never_paid_twice(
    fresh_env: PipelineEnv,
) -> None:
    # A little latency so the workers overlap; the registry asks for 20, the first run's option for 3.
    with ReplayServer(latency_s=0.05) as server:
        use_models(
            fresh_env, [{"id": "acme/m", "base_url": server.base_url, "api_key_env": "", "concurrency": 20}]
        )
        first = fresh_env.cli("run", "--models", "acme/m", "--editions", "45", "--concurrency", "3")
        assert first.exit_code == 0, first.output
        assert server.stats.total_requests == 80
        assert server.stats.max_in_flight == 3
        server.latency_s = 0.0  # the overlap is proven: the replicates need no latency
        again = fresh_env.cli("run", "--models", "acme/m", "--editions", "45", "--replicates", "2")
        assert again.exit_code == 0, again.output
        assert server.stats.total_requests == 160  # replicate 2 only: replicate 1's hashes are unchanged
        for args in (("--replicates", "2"), ()):  # both satisfied now: nothing is sent
            result = fresh_env.cli("run", "--models", "acme/m", "--editions", "45", *args)
            assert result.exit_code == 0, result.output
            assert "up to date" in result.output
        assert server.stats.total_requests == 160

    rows = fresh_env.warehouse.read("inferences", "45|acme/m")
    assert rows.group_by("run_id").len().sort("run_id").rows() == [
        ("live:acme/m:r1", 80),
        ("live:acme/m:r2", 80),
    ]
    assert rows.select("run_id", "qid").n_unique() == 160 and rows["request_hash"].n_unique() == 160
    runs = fresh_env.warehouse.read("runs").filter(pl.col("model_key") == "acme/m").sort("replicate")
    assert runs.select("run_id", "source", "replicate", "complete").rows() == [
        ("live:acme/m:r1", "live", 1, True),
        ("live:acme/m:r2", "live", 2, True),
    ]
    by_edition = fresh_env.warehouse.read("leaderboard_by_edition").filter(pl.col("model_key") == "acme/m")
    assert by_edition["run_id"].to_list() == ["live:acme/m:r2"]  # the newest complete run counts


# --suite: what the option refuses, and what a suite costs before anything is sent

PRICED = "acme/priced"


def test_suite_with_editions_or_an_unknown_suite_is_one_usage_error(fresh_env: PipelineEnv) -> None:
    for command in ("run", "status"):
        both = fresh_env.cli(command, "--suite", "all", "--editions", "43")
        assert both.exit_code == 2, both.output
        assert "Error: --suite and --editions both choose the editions: give one" in both.output
        unknown = fresh_env.cli(command, "--suite", "fgv-2000s")
        assert unknown.exit_code == 2
        known = ", ".join(load_suites())  # the packaged registry's, then all
        assert (
            f"Invalid value for '--suite': unknown suite 'fgv-2000s'; the registry has: {known}"
            in unknown.output
        )
    register_more_editions(fresh_env, [1, 2])
    fresh_env.warehouse.partition_path("questions", "2").unlink()  # registered, not ingested
    missing = fresh_env.cli("run", "--models", BASELINES[0], "--suite", "all")
    assert missing.exit_code == 2
    assert "suite all: edition(s) 2 not ingested; run `oabench ingest --editions 2`" in missing.output
    assert not fresh_env.warehouse.has_table("inferences")


def test_a_bad_suite_in_the_registry_stops_every_command_in_one_line(fresh_env: PipelineEnv) -> None:
    path = fresh_env.root / "editions.toml"
    packaged = DEFAULT_EDITIONS_FILE.read_text(encoding="utf-8")
    path.write_text(packaged.replace("editions = [43, 44, 45]", "editions = [42, 43]"), encoding="utf-8")
    fresh_env.set("OABENCH_EDITIONS_FILE", path)
    has = format_editions(e.edition for e in load_editions())
    for command in (
        ["ingest"],
        ["run", "--models", BASELINES[0]],
        ["status"],
        ["leaderboard", "--suite", "all"],
    ):
        result = fresh_env.cli(*command)
        assert result.exit_code == 1, (command, result.output)
        assert (
            result.output
            == f"Error: {path}: suite 'oabench-2026': edition(s) 42 not in the registry (it has {has})\n"
        )
    assert not fresh_env.warehouse.has_table("inferences")


def test_run_without_editions_asks_the_default_suite_and_its_dry_run_says_what_it_leaves_out(
    fresh_env: PipelineEnv,
) -> None:
    """`oabench run --models KEY` asks the suite `oabench leaderboard` ranks, not every ingested edition
    (which cost a real model ~10× what the leaderboard shows); `--suite all` and `--editions` ask more."""
    register_more_editions(fresh_env, [1, 2])  # ingested, outside the default suite
    fresh_env.set(TEST_KEY_ENV, TEST_KEY)
    models = [{"id": PRICED, "base_url": "http://127.0.0.1:9/v1", "api_key_env": TEST_KEY_ENV}]
    fresh_env.set("OABENCH_MODELS_FILE", write_models_file(fresh_env.root / "models.toml", models))

    def asked(*options: str) -> tuple[list[str], list[str]]:
        result = fresh_env.cli("run", "--models", PRICED, *options, "--dry-run")
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        cells = [line for line in lines if line.startswith(f"{PRICED} × ")]
        return lines, [line.split(" × ")[1].split(":")[0] for line in cells]

    lines, editions = asked()
    assert editions == ["43", "44", "45"]
    assert lines[0] == (
        f"suite {DEFAULT_SUITE}: 3 edition(s) (43-45), 240 question(s) (the default suite: what "
        "`oabench leaderboard` ranks)"
    )
    assert lines[1] == (
        f"not asked: 2 ingested edition(s) outside suite {DEFAULT_SUITE} (1-2); `--editions 1-2,43-45` asks "
        "every ingested edition"
    )
    assert asked("--suite", "all")[1] == ["1", "2", "43", "44", "45"]
    assert asked("--editions", "1-2,43-45")[1] == ["1", "2", "43", "44", "45"]
    assert asked("--editions", "2")[1] == ["2"]


def test_dry_run_of_a_suite_costs_each_edition_each_model_and_the_total(fresh_env: PipelineEnv) -> None:
    register_more_editions(fresh_env, [1, 2, 3], {"early": [1, 2, 3]})
    fresh_env.set(TEST_KEY_ENV, TEST_KEY)
    models = [{"id": PRICED, "base_url": "http://127.0.0.1:9/v1", "api_key_env": TEST_KEY_ENV}]
    fresh_env.set("OABENCH_MODELS_FILE", write_models_file(fresh_env.root / "models.toml", models))
    fetched = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    pricing = {"fetched_at": [fetched], "base_url": ["http://127.0.0.1:9/v1"], "model": [PRICED]}
    pricing |= {"prompt_price_per_token": [PROMPT_PRICE], "completion_price_per_token": [0.00001]}
    fresh_env.warehouse.write_partition("model_pricing", pl.DataFrame(pricing), "2026-03-01T000000")

    result = fresh_env.cli("run", "--suite", "all", "--dry-run")

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "suite all: 6 edition(s) (1-3,43-45), 480 question(s), 2.0× oabench-2026's 240"
    costs = {}
    for edition in ("1", "2", "3", "43", "44", "45"):
        active = fresh_env.warehouse.read("questions", edition).filter(pl.col("status") == "active").height
        costs[edition] = calls, cost = active, expected_prompt_cost(fresh_env, PRICED, edition)
        assert f"{PRICED} × {edition}: {calls} call(s), est. prompt cost ${cost:.4f}" in lines
    calls, cost = sum(c for c, _ in costs.values()), sum(c for _, c in costs.values())
    assert calls == 478  # 80 in each copy of the 45th, 78 active in the 43rd
    assert f"{PRICED}: 6 edition(s), {calls} call(s), est. prompt cost ${cost:.4f}" in lines
    assert lines[-1] == f"total: {calls} call(s), est. prompt cost ${cost:.4f} (prompt tokens × listed price)"
    assert not fresh_env.warehouse.has_table("inferences")

    early = fresh_env.cli("run", "--suite", "early", "--dry-run").output.splitlines()
    assert early[0] == "suite early: 3 edition(s) (1-3), 240 question(s), 1.0× oabench-2026's 240"
    assert [line.split(" × ")[1].split(":")[0] for line in early if line.startswith(f"{PRICED} × ")] == [
        "1",
        "2",
        "3",
    ]


def test_an_unknown_key_says_how_to_add_it_and_a_relative_models_file_adds_to_the_packaged_ones(
    fresh_env: PipelineEnv, tmp_path: Path
) -> None:
    """The first hour of a new model: the error gives the block to paste; that block, in a file named by a
    relative OABENCH_MODELS_FILE, adds the model to the packaged ones, and an entry of a packaged key
    replaces that one (and `oabench run` says so)."""
    monkeypatch = fresh_env.monkeypatch
    for name in ("OABENCH_MODELS_FILE", "OABENCH_PACKAGED_MODELS"):
        monkeypatch.delenv(name, raising=False)  # the packaged registry, as a user has it
    new = "acme/new-model:reasoning-high"
    refused = fresh_env.cli("run", "--models", new, "--editions", "45")
    assert refused.exit_code == 2
    assert f"unknown model key(s) {new}: not in the models registry" in refused.output
    assert "export OABENCH_MODELS_FILE=models.toml" in refused.output
    start = refused.output.index("[[models]]")
    block = refused.output[start : refused.output.index("\n\n", start)]
    assert block.splitlines()[:3] == ["[[models]]", 'id = "acme/new-model"', 'reasoning_effort = "high"']

    with ReplayServer(models={"acme/new-model": ModelPricing("0", "0")}) as server:
        user_dir = tmp_path / "mine"
        user_dir.mkdir()
        (user_dir / "models.toml").write_text(
            block.replace(
                '# base_url = "http://127.0.0.1:11434/v1"', f'base_url = "{server.base_url}"'
            ).replace('# api_key_env = ""', 'api_key_env = ""')
            + f'\n\n[[models]]\nid = "deepseek/deepseek-v3.2"\nbase_url = "{server.base_url}"\napi_key_env = ""\n',
            encoding="utf-8",
        )
        monkeypatch.chdir(user_dir)
        monkeypatch.setenv("OABENCH_MODELS_FILE", "models.toml")  # relative: from the working directory
        status = fresh_env.cli("status", "--editions", "45", "--format", "json")
        keys = {cell["model_key"] for cell in json.loads(status.output)["cells"]}
        assert {new, "deepseek/deepseek-v3.2", "baseline/random", "openai/gpt-5-mini"} <= keys

        dry = fresh_env.cli(
            "run", "--models", f"{new},deepseek/deepseek-v3.2", "--editions", "45", "--dry-run"
        )
        assert dry.exit_code == 0, dry.output
        assert (
            f"deepseek/deepseek-v3.2: the entry in {user_dir / 'models.toml'} replaces the packaged one"
            in (dry.output)
        )
        assert server.stats.total_requests == 0

        monkeypatch.setenv("OABENCH_PACKAGED_MODELS", "off")  # the file alone is the registry
        status = fresh_env.cli("status", "--editions", "45", "--format", "json")
        assert {cell["model_key"] for cell in json.loads(status.output)["cells"]} == {
            new,
            "deepseek/deepseek-v3.2",
        }


def test_an_unknown_key_in_a_huge_registry_names_the_closest_keys_not_every_key(
    fresh_env: PipelineEnv,
) -> None:
    """A registry of 5,000 keys: the refusal names the few closest to what was asked, in a few lines."""
    entries = [
        {"id": f"vendor{i // 100}/model-{i}", "base_url": "http://127.0.0.1:9/v1"} for i in range(5000)
    ]
    fresh_env.set("OABENCH_MODELS_FILE", write_models_file(fresh_env.root / "models.toml", entries))
    refused = fresh_env.cli("run", "--models", "vendor7/model-7O0", "--editions", "45")
    assert refused.exit_code == 2
    assert len(refused.output) < 3000, len(refused.output)
    last = refused.output.splitlines()[-1]
    assert last.startswith("Closest known: ") and last.endswith("lists them all)") and "(of 5,000;" in last
    closest = last.removeprefix("Closest known: ").split(" (of")[0].split(", ")
    assert 1 <= len(closest) <= 10 and all(key.startswith("vendor7/model-7") for key in closest), closest

"""`--suite` on `oabench run`, `oabench leaderboard` and `oabench status`, and what a suite costs (--dry-run).

The packaged registry knows only the study's three editions: these tests add made-up ones
(`more_editions.py`: a registry through OABENCH_EDITIONS_FILE, exam tables copied from edition 45).
"""

from __future__ import annotations

import datetime as dt
import json

import polars as pl

from oabench_pipeline.core.editions import DEFAULT_EDITIONS_FILE, format_editions, load_editions, load_suites
from oabench_pipeline.inference.cell import plan_cell
from oabench_pipeline.inference.cost import estimated_prompt_tokens
from oabench_pipeline.tables import empty_frame
from oabench_pipeline_tests.inference.replay import TEST_KEY, TEST_KEY_ENV
from oabench_pipeline_tests.more_editions import register_more_editions
from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file
from oabench_pipeline_tests.saved_envs import fresh_env_with_instance_per_module

ingested_with_instance, fresh_env = fresh_env_with_instance_per_module("cli-suites")

PRICED = "acme/priced"
PROMPT_PRICE = 0.000002
RANDOM, LONGEST = "baseline/random", "baseline/longest-choice"


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
    missing = fresh_env.cli("run", "--models", RANDOM, "--suite", "all")
    assert missing.exit_code == 2
    assert "suite all: edition(s) 2 not ingested; run `oabench ingest --editions 2`" in missing.output
    assert not fresh_env.warehouse.has_table("inferences")


def test_a_bad_suite_in_the_registry_stops_every_command_in_one_line(fresh_env: PipelineEnv) -> None:
    path = fresh_env.root / "editions.toml"
    packaged = DEFAULT_EDITIONS_FILE.read_text(encoding="utf-8")
    path.write_text(packaged.replace("editions = [43, 44, 45]", "editions = [42, 43]"), encoding="utf-8")
    fresh_env.set("OABENCH_EDITIONS_FILE", path)
    has = format_editions(e.edition for e in load_editions())
    for command in (["ingest"], ["run", "--models", RANDOM], ["status"], ["leaderboard", "--suite", "all"]):
        result = fresh_env.cli(*command)
        assert result.exit_code == 1, (command, result.output)
        assert (
            result.output
            == f"Error: {path}: suite 'oabench-2026': edition(s) 42 not in the registry (it has {has})\n"
        )
    assert not fresh_env.warehouse.has_table("inferences")


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
        plan = plan_cell(
            _model(), fresh_env.warehouse.read("questions", edition), {}, empty_frame("inferences")
        )
        costs[edition] = (
            len(plan.pending),
            estimated_prompt_tokens([r.body for r in plan.pending]) * PROMPT_PRICE,
        )
        calls, cost = costs[edition]
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


def _model():  # the registry entry the dry run priced
    from oabench_pipeline.core.models_registry import load_models_registry
    from oabench_pipeline.settings import Settings

    return next(m for m in load_models_registry(Settings.from_env().models_file) if m.key == PRICED)


def test_run_a_suite_then_its_leaderboard_and_status_while_the_study_table_stays(
    fresh_env: PipelineEnv,
) -> None:
    """One key run on `all` (the study's editions and a 1st): ranked over 320 questions there, over the
    study's 240 in the default table. (A key complete on the study only, unranked in `all`: the pure
    tests in core/test_suites.py.)"""
    register_more_editions(fresh_env, [1], {"early": [1]})
    fresh_env.monkeypatch.delenv("OABENCH_MODELS_FILE", raising=False)  # the packaged registry's baselines
    run = fresh_env.cli("run", "--models", RANDOM, "--suite", "all")
    assert run.exit_code == 0, run.output
    assert "leaderboard rebuilt: 1 model key(s) × 4 edition(s), 4 cell(s) run" in run.output

    def board(*args: str) -> dict:
        result = fresh_env.cli("leaderboard", "--format", "json", *args)
        assert result.exit_code == 0, result.output
        [row] = json.loads(result.stdout)
        return row

    default, named, everything = board(), board("--suite", "oabench-2026"), board("--suite", "all")
    assert default == named
    assert (default["official_total"], default["editions_total"], default["rank"]) == (240, 3, 1)
    assert (everything["official_total"], everything["editions_total"], everything["rank"]) == (320, 4, 1)
    assert (
        everything["official_score"] - default["official_score"]
        == board("--suite", "early")["official_score"]
    )
    table = fresh_env.cli("leaderboard", "--suite", "all").stdout.splitlines()
    assert table[-1] == "Suite all: editions 1,43-45, 320 questions; 1 of 1 model key(s) ranked"
    assert fresh_env.cli("leaderboard").stdout.splitlines()[2].startswith(f"   1  {RANDOM}  ")
    editions = fresh_env.cli("leaderboard", "--by", "edition", "--format", "json").stdout
    assert [r["edition"] for r in json.loads(editions)] == [43, 44, 45]  # the default suite's
    early = fresh_env.cli("leaderboard", "--suite", "early", "--by", "edition", "--format", "json").stdout
    assert [r["edition"] for r in json.loads(early)] == [1]

    sql = fresh_env.cli("sql", "select suite, rank, editions_total from leaderboard_by_suite order by all")
    assert "\n".join(sql.stdout.split("\n")[2:5]).split() == [
        "all",
        "1",
        "4",
        "early",
        "1",
        "1",
        "oabench-2026",
        "1",
        "3",
    ]

    status = fresh_env.cli("status", "--suite", "all", "--models", f"{RANDOM},{LONGEST}")
    assert status.exit_code == 1, status.output  # baseline/longest-choice never ran
    assert status.output.splitlines()[-1] == (
        f"suite all (editions 1,43-45): 1 of 2 model key(s) complete on every edition ({RANDOM})"
    )
    early_status = fresh_env.cli("status", "--suite", "early", "--models", RANDOM, "--format", "json")
    assert early_status.exit_code == 0
    assert json.loads(early_status.stdout)["suite"] == {
        "name": "early",
        "editions": [1],
        "complete_keys": [RANDOM],
        "model_keys": [RANDOM],
    }
    again = fresh_env.cli("run", "--models", RANDOM, "--suite", "all")
    assert "up to date: 4 cell(s) answered and scored, leaderboard current" in again.output

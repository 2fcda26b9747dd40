"""`oabench import` of the published OABench runs reproduces their summary.json from our own answer keys."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import polars as pl
import pytest

from oabench_pipeline_tests.pipeline_env import PipelineEnv
from oabench_pipeline_tests.summary_like_oabench import summarize_like_oabench

PARTIAL_RUN_KEY = "openai/gpt-5-mini"


def finished_runs(shared_oab: Path) -> list[tuple[str, dict]]:
    runs = []
    for summary_path in sorted((shared_oab / "published-runs").glob("*/summary.json")):
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
        runs.append((summary["model"], summary))
    return runs


THROUGH_THE_COMMAND = (  # the incomplete run and a complete one: four cells, scored by the command
    "2026-03-03T13-41-07-320Z_openai--gpt-5-mini_direto",
    "2026-03-03T14-58-32-738Z_google--gemini-2.5-flash-lite_direto",
)


@pytest.fixture(scope="module")
def imported(
    tmp_path_factory: pytest.TempPathFactory, ingested_template: Path, mirror_server, shared_oab: Path
):
    """Every published run imported and scored, the leaderboard and the report built, once per module.

    The same steps as `oabench import` import and score the other three runs in this process first
    (`import_and_score_in_process`: nine cells, the command's path with other data, without the command's
    leaderboard rebuild); then `oabench import` imports the incomplete run and a complete one (four cells,
    each scored in a `score_cell` run), scores none of the nine, and builds the leaderboard and the report of
    all five."""
    from oabench_pipeline_tests.pipeline_env import copy_ingested, make_env

    with pytest.MonkeyPatch.context() as monkeypatch:
        env = make_env(tmp_path_factory.mktemp("imported"), monkeypatch, mirror_server.base_url)
        copy_ingested(ingested_template, env.settings.warehouse_path.parent)
        earlier = tmp_path_factory.mktemp("earlier-published-runs")
        some = tmp_path_factory.mktemp("some-published-runs")
        for run in sorted((shared_oab / "published-runs").iterdir()):
            (some if run.name in THROUGH_THE_COMMAND else earlier).joinpath(run.name).symlink_to(run)
        import_and_score_in_process(env, earlier)
        assert_the_command_imports_and_scores_only_its_cells_and_names_the_incomplete_run(env, some)
        yield env


def assert_the_command_imports_and_scores_only_its_cells_and_names_the_incomplete_run(
    env: PipelineEnv, folder: Path
) -> None:
    """The second import scores the four cells it brought, in four `score_cell` runs, and leaves the scores of
    the nine cells imported before as they were (current: their answers did not change)."""
    from dagster import DagsterInstance, RunsFilter

    from oabench_pipeline.automation.jobs import score_cell_job

    def score_cell_runs() -> set[str]:  # `import_and_score_in_process`'s runs are of the same job
        with DagsterInstance.get() as instance:
            return {run.run_id for run in instance.get_runs(RunsFilter(job_name=score_cell_job.name))}

    scores = env.warehouse.table_dir("scores")
    earlier = {path: path.stat().st_mtime_ns for path in scores.glob("*.parquet")}
    assert len(earlier) == 9
    runs_before = score_cell_runs()
    result = env.cli("import", str(folder))
    assert result.exit_code == 0, result.output
    assert f"imported 4 cell(s) from {folder}; scored 4; leaderboard rebuilt" in result.output
    assert result.output.splitlines()[-1] == (
        "incomplete run(s) (aborted, or ended with errors), kept and shown but not ranked (the cell stays "
        "missing until a complete run): "
        f"{PARTIAL_RUN_KEY} × 45 (1 of 80 answered); `oabench status --models {PARTIAL_RUN_KEY} --editions 45` "
        "says how to complete it"
    )
    report = env.settings.warehouse_path.parent / "reports" / "leaderboard.html"
    assert f"the HTML report is {report}" in result.output
    assert {path: path.stat().st_mtime_ns for path in earlier} == earlier, "an earlier cell re-scored"
    assert len(list(scores.glob("*.parquet"))) == 13
    assert len(score_cell_runs() - runs_before) == 4


def import_and_score_in_process(env: PipelineEnv, folder: Path) -> None:
    """`oabench import`'s first steps, each an in-process Dagster run: `published_runs` with the folder (as
    the command passes it), then `scores` of each imported cell (the command builds the tables and report)."""
    from oabench_pipeline.definitions import build_definitions
    from oabench_pipeline.engine.runs import instance_for, run_assets
    from oabench_pipeline.shared.partitions import cell_partition_key

    settings = env.settings
    with instance_for(settings) as instance:
        defs = build_definitions(settings)
        config = {"ops": {"published_runs": {"config": {"path": str(folder.resolve())}}}}
        imported = run_assets(defs, instance, ["published_runs"], run_config=config)
        assert imported.success, imported.errors
        cells = env.warehouse.query(
            "select distinct model_key, edition from inferences where source = 'imported'"
        )
        assert cells.height == 9
        for model_key, edition in cells.iter_rows():
            outcome = run_assets(
                defs, instance, ["scores"], partition_key=cell_partition_key(model_key, edition)
            )
            assert outcome.success, outcome.errors


def test_leaderboard_tables_reproduce_every_published_summary(
    imported: PipelineEnv, shared_oab: Path
) -> None:
    board = imported.warehouse.read("leaderboard")
    by_edition = imported.warehouse.read("leaderboard_by_edition")
    runs = finished_runs(shared_oab)
    assert len(runs) == 4
    for model, summary in runs:
        ours = by_edition.filter(pl.col("model_key") == model).sort("edition")
        expected = [
            (
                e["edition"],
                e["officialScore"],
                e["officialTotal"],
                e["technicalScore"],
                e["technicalTotal"],
                e["invalid"],
                e["passed"],
                pytest.approx(e["strictComplianceRate"]),
            )
            for e in summary["editions"]
        ]
        got = list(
            ours.select(
                "edition",
                "official_score",
                "official_total",
                "technical_score",
                "technical_total",
                "invalid_count",
                "passed",
                "strict_compliance",
            ).iter_rows()
        )
        assert got == expected, model
        row = board.filter(pl.col("model_key") == model).row(0, named=True)
        aggregate, cost = summary["aggregate"], summary["cost"]
        assert row["official_score"] == aggregate["officialScore"]
        assert row["technical_score"] == aggregate["technicalScore"]
        assert row["technical_total"] == aggregate["technicalTotal"]
        assert row["invalid_count"] == aggregate["invalidCount"]
        assert row["strict_compliance"] == pytest.approx(aggregate["strictComplianceRate"])
        assert row["editions_passed"] == aggregate["passedCount"]
        assert row["passed_all"] == aggregate["passedAll"]
        assert row["avg_latency_ms"] == cost["avgLatencyMs"]
        assert row["prompt_tokens"] == cost["totalPromptTokens"]
        assert row["completion_tokens"] == cost["totalCompletionTokens"]
        if "actualCostUsd" in cost:
            assert row["cost_usd"] == pytest.approx(cost["actualCostUsd"], rel=1e-9)


GOLDEN = Path(__file__).parent / "golden"


def without_retired(text: str) -> str:
    """The CSV without its last column, `retired` (added since: the model catalogue's mark; none is here)."""
    lines = text.splitlines(keepends=True)
    assert lines[0].rstrip("\n").endswith(",retired") and all(
        line.rstrip("\n").endswith(",false") for line in lines[1:] if line.strip()
    )
    return "".join(line.rsplit(",", 1)[0] + "\n" if line.strip() else line for line in lines)


def same_csv(printed: str, golden: str) -> bool:
    """The same CSV: every field equal, but numbers equal to 9 significant digits rather than to the last
    bit. The Rasch fit's columns (`ability*`) come out of scipy's optimiser and numpy's linear algebra,
    whose last bits move between releases (seen: 1.6919414841674312 then ...314 after a new numpy/scipy);
    nothing a reader or a script could tell apart, and the printed table, rounded, is compared exactly."""
    printed_rows = list(csv.reader(io.StringIO(printed)))
    golden_rows = list(csv.reader(io.StringIO(golden)))
    if len(printed_rows) != len(golden_rows):
        return False
    return all(
        len(ours) == len(theirs) and all(map(same_field, ours, theirs))
        for ours, theirs in zip(printed_rows, golden_rows, strict=True)
    )


def same_field(ours: str, theirs: str) -> bool:
    if ours == theirs:
        return True
    try:
        return math.isclose(float(ours), float(theirs), rel_tol=1e-9, abs_tol=1e-12)
    except ValueError:
        return False


def test_leaderboard_prints_the_study_table_and_names_its_suite(imported: PipelineEnv) -> None:
    """`oabench leaderboard` with no flag prints the study's table (the rows as the pipeline printed them
    before suites existed, main at bf5f209, on the same runs), every column at full precision in csv
    (`same_csv`), and names the suite it ranks: the same output as `--suite oabench-2026`. An estimated
    cost is marked `~`, an unranked key `*`."""
    table = (GOLDEN / "leaderboard_published_runs.txt").read_text(encoding="utf-8")
    golden_csv = (GOLDEN / "leaderboard_published_runs.csv").read_text(encoding="utf-8")
    assert imported.cli("leaderboard").stdout == table
    assert imported.cli("leaderboard", "--suite", "oabench-2026").stdout == table
    assert (
        table.splitlines()[-1]
        == "Suite oabench-2026: editions 43-45, 240 questions; 4 of 5 model key(s) ranked"
    )
    assert same_csv(without_retired(imported.cli("leaderboard", "--format", "csv").stdout), golden_csv)
    assert same_csv(
        without_retired(imported.cli("leaderboard", "--suite", "oabench-2026", "--format", "csv").stdout),
        golden_csv,
    )


def test_oabench_summary_shape_reproduced(imported: PipelineEnv, shared_oab: Path) -> None:
    with imported.warehouse.reader() as con:
        for model, summary in finished_runs(shared_oab):
            ours = summarize_like_oabench(con, model)
            assert ours["editions"] == [
                {
                    **e,
                    "officialAccuracy": pytest.approx(e["officialAccuracy"]),
                    "technicalAccuracy": pytest.approx(e["technicalAccuracy"]),
                    "strictComplianceRate": pytest.approx(e["strictComplianceRate"]),
                }
                for e in summary["editions"]
            ], model
            for name in ("officialScore", "technicalScore", "technicalTotal", "invalidCount", "passedCount"):
                assert ours["aggregate"][name] == summary["aggregate"][name], (model, name)
            for name in (
                "totalPromptTokens",
                "totalCompletionTokens",
                "totalTokens",
                "totalLatencyMs",
                "avgLatencyMs",
            ):
                assert ours["cost"][name] == summary["cost"][name], (model, name)


def test_partial_run_is_incomplete_and_unranked(imported: PipelineEnv) -> None:
    board = imported.warehouse.read("leaderboard")
    partial = board.filter(pl.col("model_key") == PARTIAL_RUN_KEY).row(0, named=True)
    assert partial["complete"] is False
    assert partial["rank"] is None
    ranked = board.filter(pl.col("rank").is_not_null())
    assert set(ranked["model_key"]) == {
        "google/gemini-2.5-flash-lite",
        "deepseek/deepseek-v3.2",
        "anthropic/claude-haiku-4.5",
        "x-ai/grok-4.1-fast",
    }
    imported_rows = imported.warehouse.query(
        "select count(*) from inferences where model_key = ? and source = 'imported'", [PARTIAL_RUN_KEY]
    )
    assert imported_rows.item() == 24


def test_import_twice_changes_nothing(imported: PipelineEnv, shared_oab: Path) -> None:
    """The second import of the same folder: the `published_runs` asset, the one step of `oabench import`
    that writes `inferences`, materialized again with the same folder (the module's fixture ran the whole
    command once; its other steps re-score the cells and rebuild the report, and write no answer)."""
    from oabench_pipeline.definitions import build_definitions
    from oabench_pipeline.engine.runs import instance_for, run_assets

    # Only the Dagster run that wrote the rows changes: the runs and their answers stay as they were.
    before = imported.warehouse.read("inferences").sort("model_key", "run_id", "qid")
    settings = imported.settings
    folder = {"path": str((shared_oab / "published-runs").resolve())}  # as `oabench import` passes it
    with instance_for(settings) as instance:
        again = run_assets(
            build_definitions(settings),
            instance,
            ["published_runs"],
            run_config={"ops": {"published_runs": {"config": folder}}},
        )
    assert again.success, again.errors
    after = imported.warehouse.read("inferences").sort("model_key", "run_id", "qid")
    assert after.drop("dagster_run_id").equals(before.drop("dagster_run_id"))
    assert set(after["dagster_run_id"]).isdisjoint(before["dagster_run_id"])


def test_reports_are_real_images(imported: PipelineEnv) -> None:
    reports = imported.settings.warehouse_path.parent / "reports"
    for name in ("cost_vs_accuracy.png", "accuracy_by_area.png"):
        data = (reports / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000, name
    html = (reports / "leaderboard.html").read_text(encoding="utf-8")
    assert "deepseek/deepseek-v3.2" in html and "data:image/png;base64" in html


def test_partial_run_is_a_missing_cell_in_the_instance_as_in_status_not_a_failure(
    imported: PipelineEnv,
) -> None:
    """The aborted GPT-5 Mini run is real data, and an expected gap: the UI shows its partition missing (not
    green, not red), with an observation saying what it holds, as `oabench status` calls it missing."""
    from dagster import AssetCheckKey, AssetKey, DagsterInstance
    from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus

    from oabench_pipeline.engine.status import collect_status, run_states
    from oabench_pipeline.shared.partitions import model_edition_partitions

    partition = f"45|{PARTIAL_RUN_KEY}"
    with DagsterInstance.get() as instance:
        check = AssetCheckKey(AssetKey("inferences"), "every_active_question_has_a_row")
        history = instance.event_log_storage.get_asset_check_execution_history(check, limit=50)
        # Imports are not checked (only the cells this pipeline answers are): no evaluation failed.
        assert not [r for r in history if r.status == AssetCheckExecutionRecordStatus.FAILED]
        statuses = instance.get_status_by_partition(
            AssetKey("inferences"), [partition], model_edition_partitions
        )
        assert (statuses or {}).get(partition) is None  # neither materialized nor failed: missing
        assert run_states(instance, [("45", PARTIAL_RUN_KEY)]) == {}
        observations = instance.fetch_observations(AssetKey("inferences"), limit=10).records
        assert {o.partition_key for o in observations} == {partition}  # one per import of the folder
        metadata = observations[0].asset_observation.metadata
        assert metadata["unanswered"].value == 79 and metadata["source"].value == "imported"
        report = collect_status(imported.settings, instance, ["45"], [PARTIAL_RUN_KEY])
    (cell,) = report.cells
    assert cell.state == "missing"
    assert cell.reason == (
        "an incomplete imported run only (1 of 80 answered: kept, shown, not ranked); "
        f"`oabench run --models {PARTIAL_RUN_KEY} --editions 45` answers it"
    )
    # The imported answers stay.
    rows = imported.warehouse.read("inferences", partition)
    assert rows.filter(pl.col("source") == "imported").height == 24


def test_abilities_order_the_models_as_accuracy_and_three_editions_cannot_tell_a_cutoff_effect(
    imported: PipelineEnv,
) -> None:
    """On the published runs: the Rasch abilities rank the complete keys as their scores do (ties only
    within a tie group), and the training-cutoff table says the three editions cannot tell, per key."""
    board = imported.warehouse.read("leaderboard").filter(pl.col("complete"))
    rows = board.select("model_key", "technical_score", "ability", "ability_rank", "rank", "tie_group").rows()
    assert len(rows) == 4
    for a in rows:
        for b in rows:
            if a[1] > b[1] and not set(a[5]) & set(b[5]):
                assert a[2] > b[2] and a[3] < b[3], (a, b)
            if a[1] == b[1]:
                assert a[3] == b[3]
    assert board.sort("ability_rank")["model_key"].to_list() == board.sort("rank")["model_key"].to_list()
    abilities = imported.warehouse.read("item_abilities")
    assert abilities.filter(pl.col("model_key") == PARTIAL_RUN_KEY)["n_questions"].to_list() == [24]
    cutoff = imported.warehouse.read("contamination_by_cutoff").filter(
        pl.col("model_key") == "google/gemini-2.5-flash-lite"
    )
    row = cutoff.row(0, named=True)
    assert (row["editions_after"], row["editions_before"], row["questions_after"]) == (3, 0, 238)
    assert row["effect_log_odds"] is None and row["effect_ci_low"] is None and row["p_value"] is None
    assert "cannot be estimated" in row["note"]
    pooled = imported.warehouse.read("contamination_pooled").row(0, named=True)
    assert pooled["n_models_estimable"] == 0 and pooled["effect_log_odds"] is None
    pooled_row = (
        imported.warehouse.read("contamination_by_cutoff").filter(pl.col("pooled")).row(0, named=True)
    )
    assert pooled_row["model_key"] is None and pooled_row["effect_log_odds"] is None
    assert (
        "0 with questions on both sides" in pooled_row["note"] and "cannot be estimated" in pooled_row["note"]
    )

    ranked = imported.cli("leaderboard", "--rank-by", "ability")
    assert ranked.exit_code == 0, ranked.output
    lines = ranked.output.splitlines()
    assert "ability [95% CI]" in lines[0]
    assert lines[2].split()[:2] == ["1", "x-ai/grok-4.1-fast"]
    as_json = imported.cli("leaderboard", "--rank-by", "ability", "--format", "json")
    keys = [r["model_key"] for r in json.loads(as_json.output)]
    assert keys[:4] == board.sort("ability_rank")["model_key"].to_list() and keys[-1] == PARTIAL_RUN_KEY

    audit = imported.cli("audit-keys", "--editions", "43,44")
    assert audit.exit_code == 0, audit.output
    flagged = imported.warehouse.read("key_audit").filter(
        pl.col("suspicious") & pl.col("edition").is_in([43, 44])
    )
    assert audit.output.splitlines()[0] == f"{flagged.height} suspicious of 160 questions (editions 43, 44)"
    for qid in flagged["qid"]:
        assert qid in audit.output
    assert "once `oabench site` has built them" in audit.output


def test_markdown_shows_the_table_columns_unless_wide(imported: PipelineEnv) -> None:
    table_header = imported.cli("leaderboard").stdout.splitlines()[0].split("  ")
    markdown = imported.cli("leaderboard", "--format", "markdown").stdout.splitlines()
    assert [c.strip() for c in markdown[0].strip("|").split("|")] == [c.strip() for c in table_header if c]
    assert markdown[-1].startswith("Suite oabench-2026: ")
    wide = imported.cli("leaderboard", "--format", "markdown", "--wide").stdout.splitlines()
    assert len(wide[0].split("|")) > 40  # every column


def test_dry_run_prices_a_model_from_its_imported_runs_snapshot_until_a_newer_one(
    imported: PipelineEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no `model_pricing` snapshot, the price an imported run's summary carries prices the estimate;
    a snapshot taken after it wins."""
    import datetime as dt

    from oabench_pipeline.core.models_registry import load_models_registry
    from oabench_pipeline.inference.cell import build_requests
    from oabench_pipeline.inference.cost import estimated_prompt_tokens

    key = "deepseek/deepseek-v3.2"
    monkeypatch.setenv("OPENROUTER_API_KEY", "test-key-never-sent")
    [model] = [m for m in load_models_registry(imported.settings.models_file) if m.key == key]
    questions = imported.warehouse.read("questions", "43").filter(pl.col("status") == "active")
    tokens = estimated_prompt_tokens([r.body for r in build_requests(model, questions)])
    summary_price = 2.5e-07  # the run's summary.json: pricing.promptPricePerToken

    def dry_run() -> list[str]:
        result = imported.cli("run", "--models", key, "--editions", "43", "--replicates", "2", "--dry-run")
        assert result.exit_code == 0, result.output
        return result.output.splitlines()

    assert f"{key} × 43: 78 call(s), est. prompt cost ${tokens * summary_price:.4f}" in dry_run()

    fetched = dt.datetime(2026, 4, 1, tzinfo=dt.UTC)  # after the run's snapshot (2026-03-03)
    newer = {"fetched_at": [fetched], "base_url": ["https://openrouter.ai/api/v1"], "model": [model.id]}
    newer |= {"prompt_price_per_token": [1e-06], "completion_price_per_token": [2e-06]}
    imported.warehouse.write_partition("model_pricing", pl.DataFrame(newer), "2026-04-01T000000")
    try:
        assert f"{key} × 43: 78 call(s), est. prompt cost ${tokens * 1e-06:.4f}" in dry_run()
    finally:
        imported.warehouse.partition_path("model_pricing", "2026-04-01T000000").unlink()

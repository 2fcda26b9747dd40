"""`oabench import` of OAB-Bench's real `data/oab_bench` folder after `oabench ingest --phase 2`, then
`oabench leaderboard --phase 2`: the published o3 judgments give the issue's figures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from oabench_pipeline_tests.phase2.ingested import copy_phase2, phase2_all_template_fixture
from oabench_pipeline_tests.phase2.oab_bench import COMMIT, oab_bench_folder
from oabench_pipeline_tests.pipeline_env import PipelineEnv, make_env
from oabench_pipeline_tests.servers.static_files import StaticFileServer

O3, SABIA = "o3-2025-04-16", "sabia-3.1-2025-05-08"
SECOND_JUDGE = "gpt-4o-2024-08-06"


phase2_all_template = phase2_all_template_fixture()  # every 2nd-phase edition, ingested once per session


@pytest.fixture(scope="module")
def imported(
    tmp_path_factory: pytest.TempPathFactory, mirror_server: StaticFileServer, phase2_all_template: Path
) -> PipelineEnv:
    monkeypatch = pytest.MonkeyPatch()
    env = make_env(tmp_path_factory.mktemp("phase2"), monkeypatch, mirror_server.base_url)
    copy_phase2(phase2_all_template, env)  # every 2nd-phase edition, ingested once per session
    result = env.cli("import", str(oab_bench_folder()))
    assert result.exit_code == 0, result.output
    assert (
        f"imported 378 judgments by {O3} of 2 model(s): 0 invalid, 5 with no [[score]] in the text"
        in result.output
    )
    yield env
    monkeypatch.undo()


def _leaderboard(env: PipelineEnv, *args: str) -> dict[str, dict]:
    result = env.cli("leaderboard", "--phase", "2", *args, "--format", "json")
    assert result.exit_code == 0, result.output
    return {row["model_key"]: row for row in json.loads(result.output)}


def test_o3_judgments_give_the_published_figures(imported: PipelineEnv) -> None:
    board = _leaderboard(imported, "--judge", O3)
    figures = {k: (r["mean_score"], r["exams_passed"], r["exams_total"], r["rank"]) for k, r in board.items()}
    assert figures == {O3: (8.52, 21, 21, 1), SABIA: (6.71, 15, 21, 2)}
    o3 = board[O3]
    assert (o3["exams_incomplete"], o3["invalid"], o3["missing"], o3["ranked"]) == (0, 0, 0, True)
    assert o3["mean_ci_low"] < 8.52 < o3["mean_ci_high"]
    assert (o3["answer_cost_usd"], o3["judging_cost_usd"]) == (None, None)  # OAB-Bench records no cost
    assert o3["answer_run_ids"] == [f"oab-bench:{COMMIT}"]
    table = imported.cli("leaderboard", "--phase", "2", "--judge", O3)
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert lines[2].split() == ["1", "1–1", O3, "8.52", "(8.19–8.84)", "21/21", "0", "0", "—", "—"]
    assert lines[3].split()[:6] == ["2", "2–2", SABIA, "6.71", "(6.11–7.30)", "15/21"]


def test_answers_and_judgments_keep_their_source(imported: PipelineEnv) -> None:
    warehouse = imported.warehouse
    answers = warehouse.read("phase2_answers")
    assert answers.height == 6 * (21 + 84 * 2)
    assert answers["model_key"].n_unique() == 6 and answers["answer"].null_count() == 0
    assert set(answers["run_id"]) == {f"oab-bench:{COMMIT}"}
    assert f"oab-bench:{COMMIT} model_answer/{O3}.jsonl" in set(answers["source"])
    judgments = warehouse.read("phase2_judgments")
    assert judgments.height == 378 and judgments["valid"].all()
    recorded = judgments.filter(pl.col("score_source") == "recorded")
    assert recorded.height == 5  # no [[n]] in the text: OAB-Bench's recorded score is kept, and said so
    assert (recorded["score"] == recorded["recorded_score"]).all()
    assert (judgments["score"] == judgments["recorded_score"]).all()  # no disagreement anywhere
    scores = warehouse.read("phase2_scores").filter(pl.col("model_key") == SABIA)
    assert scores.height == 21 and scores["complete"].all()
    assert scores["passed"].sum() == 15


def test_a_damaged_folder_is_refused_whole_and_the_tables_keep_their_rows(
    imported: PipelineEnv, tmp_path: Path
) -> None:
    before = {
        t: imported.warehouse.read(t) for t in ("phase2_answers", "phase2_judgments", "phase2_leaderboard")
    }
    folder = shutil.copytree(oab_bench_folder(), tmp_path / "damaged" / "oab_bench")
    last = folder / "model_judgment" / f"{O3}_single.jsonl"
    lines = last.read_text(encoding="utf-8").split("\n")
    lines[200] = lines[200][:-40]  # a line cut short: the last file checked, after every answer file
    last.write_text("\n".join(lines), encoding="utf-8")
    result = imported.cli("import", str(folder))
    assert result.exit_code == 1
    assert f"model_judgment/{O3}_single.jsonl line 201: not JSON" in result.output
    assert "nothing was written" in result.output
    for table, frame in before.items():
        assert imported.warehouse.read(table).equals(frame), table


def test_an_unsafe_model_id_is_refused(imported: PipelineEnv, tmp_path: Path) -> None:
    folder = tmp_path / "oab_bench"
    (folder / "model_answer").mkdir(parents=True)
    shutil.copy(oab_bench_folder() / "question.jsonl", folder)
    line = (oab_bench_folder() / "model_answer" / f"{O3}.jsonl").read_text(encoding="utf-8").split("\n")[0]
    record = json.loads(line)
    record["model_id"] = "../../etc"
    (folder / "model_answer" / "evil.jsonl").write_text(json.dumps(record), encoding="utf-8")
    result = imported.cli("import", str(folder))
    assert result.exit_code == 1
    assert "model_answer/evil.jsonl line 1: model_id '../../etc'" in result.output
    assert "oab-bench:oab_bench" not in set(imported.warehouse.read("phase2_answers")["run_id"])


def test_a_second_judge_needs_judge_and_an_invalid_judgment_makes_an_exam_incomplete(
    imported: PipelineEnv, tmp_path: Path
) -> None:
    # The same run (its path names the commit) with a second judge's file: o3's judgments relabelled, one of
    # them scored above its sub-item's points.
    folder = shutil.copytree(
        oab_bench_folder(), tmp_path / "maritaca-ai" / "oab-bench" / COMMIT / "data" / "oab_bench"
    )
    o3_file = folder / "model_judgment" / f"{O3}_single.jsonl"
    records = [json.loads(line) for line in o3_file.read_text(encoding="utf-8").split("\n") if line]
    for record in records:
        record["judge"] = [SECOND_JUDGE, record["judge"][1]]
    target = next(
        r for r in records if r["model"] == SABIA and r["question_id"] == "39_direito_civil_questao_1"
    )
    target["judgment"] = "Nota final: [[0,99]]"
    (folder / "model_judgment" / f"{SECOND_JUDGE}_single.jsonl").write_text(
        "\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n", encoding="utf-8"
    )
    result = imported.cli("import", str(folder))
    assert result.exit_code == 0, result.output
    assert f"by {SECOND_JUDGE} of 2 model(s): 1 invalid" in result.output

    refused = imported.cli("leaderboard", "--phase", "2")
    assert refused.exit_code == 2
    assert f"choose one with --judge: {SECOND_JUDGE}, {O3}" in refused.output
    assert _leaderboard(imported, "--judge", O3)[O3]["mean_score"] == 8.52  # the first judge's figures stay

    sabia = _leaderboard(imported, "--judge", SECOND_JUDGE)[SABIA]
    assert (sabia["invalid"], sabia["exams_incomplete"], sabia["exams_total"], sabia["ranked"]) == (
        1,
        1,
        21,
        False,
    )
    assert sabia["rank"] is None
    exam = (
        imported.warehouse.read("phase2_scores")
        .filter(
            (pl.col("judge_key") == SECOND_JUDGE)
            & (pl.col("model_key") == SABIA)
            & (pl.col("edition") == 39)
            & (pl.col("area") == "direito_civil")
        )
        .row(0, named=True)
    )
    assert (exam["complete"], exam["passed"], exam["invalid"]) == (False, None, 1)  # incomplete, never failed
    judged = (
        imported.warehouse.read("phase2_judgments")
        .filter((pl.col("judge_key") == SECOND_JUDGE) & ~pl.col("valid"))
        .row(0, named=True)
    )
    points = judged["max_points"]
    assert (judged["score"], judged["invalid_reason"]) == (
        None,
        f"score 0,99 is above the sub-item's {points:.2f} points",
    )


def test_import_before_the_phase2_ingest_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = make_env(tmp_path, monkeypatch, "http://127.0.0.1:9")
    result = env.cli("import", str(oab_bench_folder()))
    assert result.exit_code == 1
    assert "run `oabench ingest --phase 2` first" in result.output
    assert not env.warehouse.has_table("phase2_answers")

"""`oabench leaderboard --current-law` and the law-currency tables, on a real warehouse built by `oabench run`
(the two offline baselines on an edition of 2010 and the 45th; docs/law_currency.md)."""

from __future__ import annotations

import json

import pytest

from oabench_pipeline.core.law_currency import DISCLAIMER
from oabench_pipeline_tests.more_editions import register_more_editions
from oabench_pipeline_tests.pipeline_env import PipelineEnv

BASELINES = ["baseline/random", "baseline/longest-choice"]


@pytest.mark.slow
def test_current_law_ranks_the_unflagged_questions_and_counts_each_flag(fresh_env: PipelineEnv) -> None:
    for name in ("OPENROUTER_API_KEY", "OABENCH_MODELS_FILE"):
        fresh_env.monkeypatch.delenv(name, raising=False)
    register_more_editions(fresh_env, [1], {"late": [1, 45]})  # the 1st: a 2010 exam, the 45th's questions
    result = fresh_env.cli("run", "--models", ",".join(BASELINES), "--suite", "late")
    assert result.exit_code == 0, result.output

    def sql(query: str) -> list[dict]:
        return json.loads(fresh_env.cli("sql", query, "--format", "json").stdout)

    # The 2010 exam's Civil Procedure questions are under the new CPC; the 45th's (2025) under nothing.
    [cpc] = sql(
        "select count(*) filter (where edition = 1 and area = 'Processo Civil') as before_cpc, "
        "count(*) filter (where list_contains(reforms_after, 'cpc-2015')) as under_cpc, "
        "count(*) filter (where list_contains(reforms_after, 'cpc-2015') and (edition <> 1 "
        "or area <> 'Processo Civil')) as wrongly, "
        "count(*) filter (where edition = 45 and possibly_superseded) as flagged_2025, "
        "count(*) filter (where possibly_superseded) as flagged from question_law_currency"
    )
    assert cpc["before_cpc"] > 0 and cpc["under_cpc"] == cpc["before_cpc"] and cpc["wrongly"] == 0
    assert cpc["flagged_2025"] == 0 and cpc["flagged"] > cpc["under_cpc"]  # labour, criminal, ... too
    reforms = sql("select reform, in_force::VARCHAR as in_force, questions_flagged from legal_reforms")
    assert {"reform": "cpc-2015", "in_force": "2016-03-18", "questions_flagged": cpc["before_cpc"]} in reforms

    table = fresh_env.cli("leaderboard", "--suite", "late", "--current-law")
    assert table.exit_code == 0, table.output
    current = 160 - cpc["flagged"]
    assert f"160 questions, ranked here on the {current} of current law" in table.output
    assert DISCLAIMER in table.output
    lines = table.output.splitlines()
    assert any(line.split() == ["possibly", "superseded", str(cpc["flagged"])] for line in lines)
    assert any(line.startswith("under cpc-2015 (in force 2016-03-18)") for line in lines)
    rows = json.loads(
        fresh_env.cli("leaderboard", "--suite", "late", "--current-law", "--format", "json").stdout
    )
    assert sorted(r["model_key"] for r in rows) == sorted(BASELINES)
    assert all(r["official_total"] == current and r["rank"] is not None for r in rows)
    assert all(r["suite"] == "late" and 0 <= r["official_score"] <= current for r in rows)
    everything = fresh_env.cli("leaderboard", "--suite", "all", "--current-law")  # the 1st and 43rd-45th
    assert everything.exit_code == 0, everything.output
    assert f"320 questions, ranked here on the {320 - cpc['flagged']} of current law" in everything.output
    # Within the default suite (the 43rd-45th, of 2025, nothing is flagged) every question counts.
    default = fresh_env.cli("leaderboard", "--current-law").output
    assert "240 questions, ranked here on the 240 of current law" in default
    refused = fresh_env.cli("leaderboard", "--current-law", "--by", "edition")
    assert refused.exit_code == 2 and "--current-law ranks models by accuracy" in refused.output
    [suite] = sql(
        "select questions, questions_current_law, questions_possibly_superseded from suites where suite = 'late'"
    )
    assert suite == {
        "questions": 160,
        "questions_current_law": current,
        "questions_possibly_superseded": cpc["flagged"],
    }

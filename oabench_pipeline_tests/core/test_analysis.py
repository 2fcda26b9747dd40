"""The corrected statistics, each checked against an independent scipy computation."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import pytest
from scipy import stats as sps

from oabench_pipeline.core.analysis import intervals, pairwise
from oabench_pipeline.core.analysis.edition_deltas import edition_deltas
from oabench_pipeline.core.analysis.providers import provider_summary
from oabench_pipeline.core.leaderboard import build_leaderboard_tables
from oabench_pipeline_tests.core.synthetic_results import make_synthetic_warehouse, register


def test_wilson_matches_scipy_including_the_ceiling() -> None:
    k = np.array([0, 1, 120, 231, 235, 238, 30])
    n = np.array([238, 238, 238, 238, 238, 238, 40])
    low, high = intervals.wilson_interval(k, n)
    for i in range(k.size):
        ci = sps.binomtest(int(k[i]), int(n[i])).proportion_ci(confidence_level=0.95, method="wilson")
        assert (low[i], high[i]) == (pytest.approx(ci.low, abs=1e-12), pytest.approx(ci.high, abs=1e-12))
    empty_low, empty_high = intervals.wilson_interval([0], [0])
    assert np.isnan(empty_low[0]) and np.isnan(empty_high[0])


def test_official_interval_credits_annulled_questions_with_certainty() -> None:
    ci = sps.binomtest(231, 238).proportion_ci(method="wilson")
    low, high = intervals.official_interval([ci.low], [ci.high], active=[238], total=[240])
    assert low[0] == pytest.approx((2 + 238 * ci.low) / 240)
    assert high[0] == pytest.approx((2 + 238 * ci.high) / 240)


def test_pass_probability_is_the_exact_binomial_tail() -> None:
    scores = np.array([[79, 76, 80], [63, 52, 61], [40, 39, 41]])
    totals = np.full(scores.shape, 80)
    got = intervals.pass_probability(scores, totals, 40)
    expected = sps.binom.sf(39, 80, scores / 80)
    assert got == pytest.approx(expected, abs=1e-14)
    assert intervals.pass_probability([[50]], [[0]], 40)[0, 0] == 0.0  # edition not sat


def test_leaderboard_numbers_match_scipy_and_do_not_depend_on_other_models() -> None:
    warehouse = make_synthetic_warehouse(n_models=8, n_editions=3, seed=5)
    tables = build_leaderboard_tables(register(duckdb.connect(), warehouse))
    board, by_edition = tables["leaderboard"], tables["leaderboard_by_edition"]
    for row in board.filter(pl.col("complete")).iter_rows(named=True):
        ci = sps.binomtest(row["technical_score"], row["technical_total"]).proportion_ci(method="wilson")
        assert (row["technical_ci_low"], row["technical_ci_high"]) == (
            pytest.approx(ci.low),
            pytest.approx(ci.high),
        )
        annulled = row["official_total"] - row["technical_total"]
        assert row["accuracy_ci_low"] == pytest.approx(
            (annulled + row["technical_total"] * ci.low) / row["official_total"]
        )
        eds = by_edition.filter(pl.col("model_key") == row["model_key"])
        p_edition = eds["official_score"].to_numpy() / eds["official_total"].to_numpy()
        exact = np.prod(sps.binom.sf(39, eds["official_total"].to_numpy(), p_edition))  # pass: >= 40 of 80
        assert row["p_pass"] == pytest.approx(exact, rel=1e-12)
    # Drop one model from the warehouse: nobody else's interval or p_pass moves (no shared random stream).
    dropped = warehouse.model_keys[0]
    inferences = pl.from_arrow(warehouse.tables["inferences"])
    assert isinstance(inferences, pl.DataFrame)
    fewer = {**warehouse.tables, "inferences": inferences.filter(pl.col("model_key") != dropped).to_arrow()}
    con = duckdb.connect()
    for name, table in fewer.items():
        con.register(name, table)
    again = build_leaderboard_tables(con)["leaderboard"]
    columns = [
        "model_key",
        "accuracy_ci_low",
        "accuracy_ci_high",
        "technical_ci_low",
        "technical_ci_high",
        "p_pass",
    ]
    assert (
        again.select(columns)
        .sort("model_key")
        .equals(board.filter(pl.col("model_key") != dropped).select(columns).sort("model_key"))
    )


def test_mcnemar_and_holm_match_scipy_and_a_direct_holm() -> None:
    rng = np.random.default_rng(3)
    covered = np.ones((5, 240), dtype=bool)
    correct = rng.random((5, 240)) < np.array([0.95, 0.9, 0.85, 0.6, 0.59])[:, None]
    keys = pl.Series([f"k{i}" for i in range(5)])
    table, better = pairwise.pairwise(keys, covered, correct)
    raw = []
    for row in table.iter_rows(named=True):
        b, c = row["a_only_correct"], row["b_only_correct"]
        expected = sps.binomtest(min(b, c), b + c, 0.5).pvalue if b + c else 1.0
        assert row["p_value"] == pytest.approx(expected, rel=1e-10)
        raw.append(row["p_value"])
    order = np.argsort(raw)
    m = len(raw)
    holm = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * raw[i]))
        holm[i] = running
    assert table["p_holm"].to_numpy() == pytest.approx(holm)
    # better[i, j] only for significant pairs, pointing from the more accurate key.
    for row in table.filter(pl.col("significant")).iter_rows(named=True):
        i, j = int(row["model_a"][1:]), int(row["model_b"][1:])
        assert better[i, j] == (row["a_only_correct"] > row["b_only_correct"])


def test_rank_intervals_and_letters_follow_the_tests() -> None:
    # Keys in score order; 0 beats 2 and 3, 1 beats 3; nothing else is significant.
    better = np.zeros((4, 4), dtype=bool)
    better[0, 2] = better[0, 3] = better[1, 3] = True
    low, high = pairwise.rank_intervals(better)
    assert low.tolist() == [1, 1, 2, 3] and high.tolist() == [2, 3, 4, 4]
    letters = pairwise.compact_letters([0, 1, 2, 3], better | better.T)
    assert letters == ["a", "ab", "bc", "c"]
    # Every pair sharing a letter is not significantly different, every significant pair shares none.
    for i in range(4):
        for j in range(4):
            if better[i, j]:
                assert not set(letters[i]) & set(letters[j])
    assert pairwise.compact_letters(list(range(30)), np.zeros((30, 30), dtype=bool)) == ["a"] * 30


def test_providers_group_case_insensitively_over_complete_keys() -> None:
    keys = pl.DataFrame(
        {
            "model_key": ["openai/a", "OpenAI/b", "openai/c", "x/d", "openai/incomplete"],
            "provider": ["openai", "OpenAI", "openai", "x", "openai"],
            "official_accuracy": [0.9, 0.8, 0.7, 0.5, 0.1],
            "complete": [True, True, True, True, False],
            "cost_usd": [1.0, None, 3.0, None, 9.0],
            "estimated_cost_usd": [1.1, None, 2.9, 0.2, 9.0],
            "effective_cost_usd": [1.0, None, 3.0, 0.2, 9.0],
        }
    )
    table = provider_summary(keys)
    openai = table.filter(pl.col("provider") == "openai").row(0, named=True)
    assert table.height == 2 and openai["n_keys"] == 3
    assert openai["mean_accuracy"] == pytest.approx(np.mean([0.9, 0.8, 0.7]))
    assert (openai["min_accuracy"], openai["max_accuracy"]) == (0.7, 0.9)
    assert openai["accuracy_range"] == pytest.approx(0.2)
    assert (openai["mean_cost_usd"], openai["n_keys_with_cost"]) == (pytest.approx(2.0), 2)
    assert openai["total_cost_usd"] is None  # one key has no reported cost: no silent partial total


def test_edition_deltas_use_official_accuracy_and_fisher_exact() -> None:
    by_edition = pl.DataFrame(
        {
            "model_key": ["m"] * 3 + ["n"],
            "edition": [43, 44, 45, 43],
            "official_accuracy": [79 / 80, 0.95, 80 / 80, 0.5],
            "technical_accuracy": [77 / 78, 0.95, 80 / 80, 0.5],
            "technical_score": [77, 76, 80, 39],
            "technical_total": [78, 80, 80, 78],
        }
    )
    table = edition_deltas(by_edition, pl.Series(["m", "n"]))
    m = table.filter(pl.col("model_key") == "m").row(0, named=True)
    assert m["official_delta_pp"] == pytest.approx(100 * (80 / 80 - 79 / 80))
    assert m["technical_delta_pp"] == pytest.approx(100 * (1 - 77 / 78))
    assert m["fisher_p"] == pytest.approx(sps.fisher_exact([[77, 1], [80, 0]]).pvalue)
    assert table.filter(pl.col("model_key") == "n")["fisher_p"].item() is None  # one edition only


def _item_questions(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "qid": [f"q{i}" for i in range(n)],
            "edition": [1] * n,
            "number": list(range(1, n + 1)),
            "area": ["Ética"] * n,
            "correct": ["A"] * n,
            "status": ["active"] * n,
        }
    )


def _item_mats(letters: list[list[str]]) -> dict[str, np.ndarray]:
    """Keys × questions: each key's letter per question ('-' for no row)."""
    codes = {letter: code for code, letter in enumerate(pairwise.LETTER_CODES)}
    coded = np.array([[codes.get(x, pairwise.ABSENT) for x in row] for row in letters], dtype=np.int8)
    covered = coded != pairwise.ABSENT
    return {"E": covered, "C": covered & (coded == codes["A"]), "L": coded}


def test_item_statistics_leave_baselines_out_and_need_three_models_to_call_a_question_hard() -> None:
    from oabench_pipeline.core.analysis.items import item_analysis

    # Two guessers (rows 0-1) and two real models: every key got q0 wrong; q1 only the models answered.
    mats = _item_mats([["B", "-"], ["C", "-"], ["D", "A"], ["B", "A"]])
    real = np.array([False, False, True, True])
    accuracy = np.array([0.25, 0.25, 0.9, 0.8])
    items = item_analysis(_item_questions(2), mats, accuracy, real_models=real).sort("number")
    q0 = items.row(0, named=True)
    assert (q0["n_models"], q0["share_correct"], q0["flag"]) == (2, 0.0, None)  # 0/2 models: no verdict
    assert q0["answer_distribution"] == {"A": 0, "B": 1, "C": 0, "D": 1, "none": 0}  # the guessers' C: gone
    # With every key counted, the guessers' answers are back, and four keys are enough to say 'hard'.
    everyone = item_analysis(_item_questions(2), mats, accuracy).sort("number").row(0, named=True)
    assert (everyone["n_models"], everyone["flag"]) == (4, "hard")

    three_models = _item_mats([["B"], ["C"], ["D"], ["B"], ["C"]])
    real = np.array([False, False, True, True, True])
    flagged = item_analysis(_item_questions(1), three_models, np.full(5, 0.5), real_models=real)
    assert flagged.row(0, named=True)["flag"] == "hard"


def test_the_leaderboard_item_analysis_counts_no_baseline() -> None:
    warehouse = make_synthetic_warehouse()
    con = duckdb.connect()
    register(con, warehouse)
    baseline_key = con.execute("SELECT min(model_key) FROM inferences").fetchall()[0][0]
    models = con.sql("SELECT * FROM models").pl()
    if baseline_key in models["model_key"].to_list():
        models = models.with_columns(
            kind=pl.when(pl.col("model_key") == baseline_key).then(pl.lit("baseline")).otherwise("kind")
        )
    else:
        models = pl.concat(
            [models, models.head(1).with_columns(model_key=pl.lit(baseline_key), kind=pl.lit("baseline"))]
        )
    con.register("models", models.to_arrow())
    keys = con.execute("SELECT count(DISTINCT model_key) FROM inferences").fetchall()[0][0]
    items = build_leaderboard_tables(con)["item_analysis"]
    assert items["n_models"].max() == keys - 1

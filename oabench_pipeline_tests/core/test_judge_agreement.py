"""`core/phase2/agreement.py`: judges compared, on hand-made frames and on simulated judges with a planted
agreement (`judge_simulation.simulate(seed, ...)`, seeded, so each figure is the same on every run).

The quick simulation runs by default; the `simulation` marker runs the full size (many replicates, the
interval's coverage): `pytest -m simulation oabench_pipeline_tests/core/test_judge_agreement.py` (in `.ci/run`).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from oabench_pipeline.core.phase2.agreement import OVERALL, exam_pass_pairs, judge_agreement
from oabench_pipeline_tests.core.judge_simulation import simulate


def _judgments(rows: list[tuple[str, str, str, int, float | None]]) -> pl.DataFrame:
    """(judge, model, item, turn, score) in one area-exam, 39 × direito_civil."""
    return pl.DataFrame(
        [
            {
                "judge_key": judge,
                "model_key": model,
                "item_id": item,
                "turn": turn,
                "area": "direito_civil",
                "edition": 39,
                "score": score,
            }
            for judge, model, item, turn, score in rows
        ],
        schema_overrides={"turn": pl.Int32, "edition": pl.Int32, "score": pl.Float64},
    )


def test_one_judge_gives_no_rows() -> None:
    frame = _judgments([("o3", "m", "piece", 1, 4.0)])
    assert judge_agreement(frame).is_empty()


def test_mae_and_pass_disagreement_by_hand() -> None:
    # model m: judge o3 gives 4.0 + 2.0 = 6.00 (passes), judge gpt gives 3.5 + 2.0 = 5.50 (fails);
    # model n: both pass. Differences 0.5, 0, 0, 0.5 → MAE 0.25.
    frame = _judgments(
        [
            ("o3", "m", "piece", 1, 4.0),
            ("o3", "m", "q1", 1, 2.0),
            ("gpt", "m", "piece", 1, 3.5),
            ("gpt", "m", "q1", 1, 2.0),
            ("o3", "n", "piece", 1, 5.0),
            ("o3", "n", "q1", 1, 2.5),
            ("gpt", "n", "piece", 1, 4.5),
            ("gpt", "n", "q1", 1, 2.5),
        ]
    )
    table = judge_agreement(frame)
    assert table["area"].to_list() == [OVERALL, "direito_civil"]
    overall = table.row(0, named=True)
    assert (overall["judge_a"], overall["judge_b"]) == ("gpt", "o3")
    assert overall["answers"] == 4
    assert overall["mae"] == pytest.approx(0.25)
    assert overall["mean_difference"] == pytest.approx(-0.25)  # gpt − o3
    assert overall["exams_compared"] == 2
    assert overall["exams_pass_disagree"] == 1
    assert overall["pass_disagreement_rate"] == pytest.approx(0.5)
    assert overall["icc"] is None  # 4 answers: too few for the ICC


def test_invalid_judgment_leaves_its_sub_item_and_exam_out() -> None:
    frame = _judgments(
        [
            ("o3", "m", "piece", 1, 4.0),
            ("o3", "m", "q1", 1, 2.0),
            ("gpt", "m", "piece", 1, 3.0),
            ("gpt", "m", "q1", 1, None),  # invalid: not compared, and the exam is incomplete, not failed
        ]
    )
    overall = judge_agreement(frame).row(0, named=True)
    assert overall["answers"] == 1
    assert overall["mae"] == pytest.approx(1.0)
    assert overall["exams_compared"] == 0
    assert overall["pass_disagreement_rate"] is None


def test_an_exam_missing_a_sub_item_is_not_compared_when_the_exam_is_known() -> None:
    frame = _judgments([("o3", "m", "piece", 1, 4.0), ("gpt", "m", "piece", 1, 1.0)])
    expected = pl.DataFrame({"edition": [39], "area": ["direito_civil"], "sub_items": [9]})
    assert exam_pass_pairs(frame).height == 1
    assert exam_pass_pairs(frame, expected).height == 0


def test_planted_agreement_is_recovered_quick() -> None:
    """One seed, 3 areas × 60 answers, planted ICC 0.772 (true sd 1, noise sd 0.5, biases 0 and 0.3): estimated 0.798 [0.665, 0.870]."""
    sim = simulate(7)
    table = judge_agreement(sim.judgments)
    overall = table.filter(pl.col("area") == OVERALL).row(0, named=True)
    assert overall["answers"] == 180
    assert overall["icc_ci_low"] <= sim.planted_icc <= overall["icc_ci_high"]
    assert overall["icc"] == pytest.approx(sim.planted_icc, abs=0.06)
    assert overall["mae"] == pytest.approx(sim.planted_mae, abs=0.08)
    assert overall["mean_difference"] == pytest.approx(-0.3, abs=0.1)
    assert overall["pearson"] > 0.7
    for row in table.filter(pl.col("area") != OVERALL).iter_rows(named=True):
        assert row["answers"] == 60
        assert row["icc_ci_low"] <= sim.planted_icc <= row["icc_ci_high"]


def test_judges_that_agree_less_get_a_lower_icc() -> None:
    close, far = simulate(11, noise_sd=0.3, bias_b=0.0), simulate(11, noise_sd=1.0, bias_b=0.8)
    icc = {
        name: judge_agreement(sim.judgments).filter(pl.col("area") == OVERALL)["icc"].item()
        for name, sim in (("close", close), ("far", far))
    }
    assert close.planted_icc > 0.9 > 0.5 > far.planted_icc
    assert icc["close"] > 0.85 and icc["far"] < 0.55


@pytest.mark.simulation
@pytest.mark.parametrize(
    ("noise_sd", "bias_b", "max_coverage"),
    [(0.5, 0.3, 1.0), (0.3, 0.0, 0.98), (1.0, 0.8, 1.0)],
    ids=["moderate", "close", "far"],
)
def test_planted_icc_interval_covers_it(noise_sd: float, bias_b: float, max_coverage: float) -> None:
    """200 replicates of 3 areas × 60 answers: the overall ICC's 95% interval covers the planted value in at
    least 92% of them, and the estimates average within 0.02 of it; the MAE within 0.02 of its planted value.

    With two judges whose biases differ, the interval is conservative (it treats the judges as drawn at random,
    their bias variance known from 1 degree of freedom, while here the two biases are fixed): it covers
    ~99%. With equal biases it is exact, 92-98%."""
    replicates = 200
    covered, estimates, maes = 0, [], []
    for seed in range(replicates):
        sim = simulate(1000 + seed, noise_sd=noise_sd, bias_b=bias_b)
        overall = judge_agreement(sim.judgments).filter(pl.col("area") == OVERALL).row(0, named=True)
        covered += overall["icc_ci_low"] <= sim.planted_icc <= overall["icc_ci_high"]
        estimates.append(overall["icc"])
        maes.append(overall["mae"])
    coverage = covered / replicates
    print(
        f"planted ICC {sim.planted_icc:.3f}: mean estimate {np.mean(estimates):.3f} "
        f"(sd {np.std(estimates):.3f}), 95% interval coverage {coverage:.3f}; "
        f"planted MAE {sim.planted_mae:.3f}, mean {np.mean(maes):.3f}"
    )
    assert 0.92 <= coverage <= max_coverage
    assert np.mean(estimates) == pytest.approx(sim.planted_icc, abs=0.02)
    assert np.mean(maes) == pytest.approx(sim.planted_mae, abs=0.02)


def test_correlations_and_icc_are_on_the_share_of_each_sub_items_points() -> None:
    """A piece (5.00) beside sub-items (0.65): on raw points the ICC would mostly see the piece's scale."""
    sim = simulate(5, answers_per_area=20)
    max_points = pl.Series([5.0 if i % 9 == 0 else 0.65 for i in range(sim.judgments.height)])
    frame = sim.judgments.with_columns(max_points=max_points, score=pl.col("score") * max_points)
    with_points = judge_agreement(frame).filter(pl.col("area") == OVERALL).row(0, named=True)
    plain = judge_agreement(sim.judgments).filter(pl.col("area") == OVERALL).row(0, named=True)
    assert with_points["icc"] == pytest.approx(plain["icc"])
    assert with_points["spearman"] == pytest.approx(plain["spearman"])
    assert with_points["mae"] != pytest.approx(plain["mae"])  # the MAE stays in points

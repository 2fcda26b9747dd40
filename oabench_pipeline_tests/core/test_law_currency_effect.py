"""`law_currency_effect` checked by simulation, as the training-cutoff effect is (`test_item_response.py`).

Simulated benchmarks (`irt_simulation.simulate`, seeded) whose questions are split as the OAB's are by
later law (`law_flags`: three of eight areas flagged in the first 60% of the editions), with a planted
change in log-odds on the flagged questions for some keys. The table's own function runs on them: a
planted effect is recovered, and with none the test rejects at about the nominal 5%. The default run
uses small sizes; `pytest -m simulation` the full ones (29 editions × 80 questions, hundreds of tests).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from oabench_pipeline.core.analysis.item_response import fit_rasch
from oabench_pipeline.core.analysis.law_currency_effect import law_currency_effect
from oabench_pipeline_tests.core.irt_simulation import law_flags, simulate


def _effects(
    seeds: range, planted: list[int], effect: float, *, n_keys: int, n_editions: int, per_edition: int
) -> pl.DataFrame:
    """Every key's row of the table (only the `planted` keys' when some are), over `seeds` benchmarks."""
    flagged = law_flags(n_editions, per_edition)
    effects = np.zeros(n_keys)
    effects[planted] = effect
    rows = []
    for seed in seeds:
        sim = simulate(
            seed,
            n_keys=n_keys,
            n_editions=n_editions,
            per_edition=per_edition,
            effects=effects,
            flagged=flagged,
        )
        fit = fit_rasch(sim.correct, sim.covered, sim.group)
        mats = {"E": sim.covered, "C": sim.correct, "L": sim.letters}
        keys = pl.Series([f"key-{k:02d}" for k in range(n_keys)])
        table = law_currency_effect(keys, fit, mats, flagged).filter(~pl.col("pooled"))
        if planted:
            table = table.filter(pl.col("model_key").is_in([f"key-{k:02d}" for k in planted]))
        rows.append(table)
    return pl.concat(rows)


def _rejected(rows: pl.DataFrame) -> float:
    return float((rows["p_value"] < 0.05).mean())  # type: ignore[arg-type]


def test_no_effect_is_rejected_about_5_percent_of_the_time() -> None:
    """300 tests (15 benchmarks × 20 keys, 29 editions × 20 questions, ~130 flagged per key): SE 1.3
    points, so 1.5–9% holds the 5% level with room for ±3 SE; the intervals cover 0 as often."""
    rows = _effects(range(15), [], 0.0, n_keys=20, n_editions=29, per_edition=20)
    assert rows.height == 300 and rows["p_value"].null_count() == 0
    rejected = _rejected(rows)
    assert 0.015 <= rejected <= 0.09, rejected
    covered = float(((rows["effect_ci_low"] <= 0) & (rows["effect_ci_high"] >= 0)).mean())  # type: ignore[arg-type]
    assert covered == pytest.approx(1 - rejected)


@pytest.mark.simulation
def test_no_effect_is_rejected_5_percent_of_the_time_at_full_size() -> None:
    """1,200 tests (50 benchmarks × 24 keys, 29 editions × 80): SE 0.63 points, 3.1–6.9%."""
    rows = _effects(range(50), [], 0.0, n_keys=24, n_editions=29, per_edition=80)
    assert rows.height == 1200
    assert 0.031 <= _rejected(rows) <= 0.069, _rejected(rows)


def test_a_planted_drop_of_half_a_logit_is_recovered() -> None:
    """A key 0.5 log-odds worse on the flagged questions (12 keys, 29 editions × 80, the others
    unaffected): found (p < 0.05, effect < 0) in at least 8 of 10 benchmarks, and at least 8 of the 10
    intervals cover −0.5 (the bounds 10 draws allow at the full-size test's power and ~95% coverage)."""
    rows = _effects(range(10), [0], -0.5, n_keys=12, n_editions=29, per_edition=80)
    assert rows.height == 10
    found = rows.filter((pl.col("p_value") < 0.05) & (pl.col("effect_log_odds") < 0)).height
    covering = rows.filter((pl.col("effect_ci_low") <= -0.5) & (pl.col("effect_ci_high") >= -0.5)).height
    assert found >= 8 and covering >= 8, (found, covering)
    # The raw accuracies show the drop too, confounded with the flagged areas' difficulty.
    assert rows["questions_superseded"].min() == int(law_flags(29, 80).sum())  # type: ignore[operator]


@pytest.mark.simulation
def test_planted_effect_power_and_coverage_at_full_size() -> None:
    """100 planted drops of −0.5 (50 benchmarks × keys 0 and 11 of 12): power ≥ 85%, coverage 90–99%."""
    rows = _effects(range(50), [0, 11], -0.5, n_keys=12, n_editions=29, per_edition=80)
    assert rows.height == 100
    assert _rejected(rows) >= 0.85
    covering = float(((rows["effect_ci_low"] <= -0.5) & (rows["effect_ci_high"] >= -0.5)).mean())  # type: ignore[arg-type]
    assert 0.90 <= covering <= 0.99, covering


def test_the_pooled_row_sums_the_keys_and_a_key_with_one_kind_of_question_has_no_effect() -> None:
    """The pooled row sums the keys' counts and shares one effect; a key that answered only current-law
    questions gets a note, in this table's words, and no effect."""
    flagged = law_flags(10, 40)
    sim = simulate(3, n_keys=6, n_editions=10, per_edition=40, flagged=flagged)
    covered = sim.covered.copy()
    covered[5, flagged] = False
    fit = fit_rasch(sim.correct & covered, covered, sim.group)
    mats = {"E": covered, "C": sim.correct & covered, "L": sim.letters}
    table = law_currency_effect(pl.Series([f"k{i}" for i in range(6)]), fit, mats, flagged)
    keys, pooled = table.filter(~pl.col("pooled")), table.filter(pl.col("pooled"))
    assert keys.height == 6 and pooled.height == 1 and pooled["model_key"][0] is None
    for column in ("correct_superseded", "total_superseded", "correct_current", "total_current"):
        assert pooled[column][0] == keys[column].sum()
    lonely = keys.row(5, named=True)
    assert lonely["effect_log_odds"] is None and lonely["total_superseded"] == 0
    assert lonely["note"].startswith("every question (") and "is a current-law question" in lonely["note"]
    assert "cutoff" not in lonely["note"]
    assert pooled["effect_log_odds"][0] is not None and pooled["p_value"][0] is not None

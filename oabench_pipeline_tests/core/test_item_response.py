"""The Rasch fit, the training-cutoff effect and the key audit, checked on simulated results with known truth.

Every simulation is seeded (`irt_simulation.simulate(seed, ...)`), so each figure below is the same on
every run; the tolerances are what the number of simulated intervals or tests allows (binomial standard
errors, stated at each test). The default suite runs small but sufficient sizes (~10 s together); the
`simulation` marker runs the full sizes of the issue (29 editions × 80 questions, hundreds of tests):
`pytest -m simulation oabench_pipeline_tests/core/test_item_response.py` (in `.ci/run`).
"""

from __future__ import annotations

import datetime as dt
import warnings

import numpy as np
import polars as pl
import pytest

from oabench_pipeline.core.analysis import item_response as irt
from oabench_pipeline.core.analysis.cutoff_effect import cutoff_effect, key_cutoff_data
from oabench_pipeline.core.analysis.item_response import fit_rasch, leave_one_out
from oabench_pipeline.core.analysis.key_audit import audit_keys
from oabench_pipeline_tests.core.irt_simulation import Simulation, simulate


def _fit(sim: Simulation) -> irt.RaschFit:
    return fit_rasch(sim.correct, sim.covered, sim.group)


def test_gradient_and_hessian_match_finite_differences() -> None:
    sim = simulate(2, n_keys=5, n_editions=3, per_edition=10, coverage=0.8)
    e, y = sim.covered.astype(float), sim.correct.astype(float)
    _, group_component = irt._components(e, sim.group, 3)
    basis = irt._constraint_basis(group_component, np.bincount(sim.group).astype(float))
    data = irt._Data(y, e, sim.group, 3, basis)
    theta, mu, rho = sim.ability + 0.1, np.array([0.2, -0.1, 0.3]), 0.1
    centre, scale = irt._modes(data, theta, mu, float(np.exp(rho)), np.zeros(sim.group.size))
    evaluation = irt._Evaluation(data, *irt._quadrature(centre, scale, irt.QUADRATURE_NODES))
    value, grad, hess, _, _ = evaluation.derivatives(theta, mu, rho)
    x0 = np.concatenate([theta, mu, [rho]])
    h = 1e-5
    unit = np.eye(x0.size)

    def objective(x: np.ndarray) -> float:
        return evaluation.objective(x[:5], x[5:8], float(x[-1]))

    def gradient(x: np.ndarray) -> np.ndarray:
        return evaluation.derivatives(x[:5], x[5:8], float(x[-1]))[1]

    assert value == pytest.approx(objective(x0))
    numeric_grad = np.array([(objective(x0 + h * u) - objective(x0 - h * u)) / (2 * h) for u in unit])
    numeric_hess = np.array([(gradient(x0 + h * u) - gradient(x0 - h * u)) / (2 * h) for u in unit])
    np.testing.assert_allclose(grad, numeric_grad, atol=1e-7)
    np.testing.assert_allclose(hess, numeric_hess, atol=1e-7)


def _ability_coverage(seeds: range, **sizes: int) -> tuple[float, int]:
    hits = []
    for seed in seeds:
        sim = simulate(seed, **sizes)
        fit = _fit(sim)
        assert fit.converged
        hits.append(np.abs(fit.ability - sim.ability) <= irt.Z95 * fit.ability_se)
    covered = np.concatenate(hits)
    return float(covered.mean()), covered.size


def test_ability_intervals_cover_the_true_ability_95_percent_of_the_time() -> None:
    """600 intervals (60 simulated benchmarks × 10 keys, 6 editions × 40 questions, 10% of answers
    missing): the binomial standard error of the coverage is 0.9 points, so 92–98% is ±3 of them."""
    coverage, n = _ability_coverage(range(60), n_keys=10, n_editions=6, per_edition=40, coverage=0.9)
    assert n == 600
    assert 0.92 <= coverage <= 0.98, coverage


@pytest.mark.simulation
def test_ability_intervals_cover_95_percent_at_full_size() -> None:
    """2,000 intervals (50 benchmarks × 40 keys × 29 editions × 80 questions): SE 0.5 points, 93.5–96.5%."""
    coverage, n = _ability_coverage(range(50), n_keys=40, n_editions=29, per_edition=80)
    assert n == 2000
    assert 0.935 <= coverage <= 0.965, coverage


def test_difficulties_and_edition_means_recover_the_truth() -> None:
    sim = simulate(7, n_keys=20, n_editions=10, per_edition=40)
    fit = _fit(sim)
    # 20 answers per question leave a posterior sd of ~0.6 against a spread of 1.2: r ≈ 0.85 at best.
    assert np.corrcoef(fit.difficulty, sim.difficulty)[0, 1] > 0.8
    z = (fit.group_mean - sim.edition_mean) / fit.group_mean_se
    assert np.abs(z).max() < 3.5
    inside = np.abs(fit.difficulty - sim.difficulty) <= irt.Z95 * fit.difficulty_sd
    assert 0.92 <= inside.mean() <= 0.98  # 400 questions


def test_same_answers_give_the_same_ability_and_a_perfect_score_stays_finite() -> None:
    sim = simulate(3, n_keys=6, n_editions=3, per_edition=40)
    correct = sim.correct.copy()
    correct[1] = correct[0]  # key 1 answers exactly as key 0
    correct[2] = sim.covered[2]  # key 2 gets everything right
    fit = fit_rasch(correct, sim.covered, sim.group)
    assert fit.ability[1] == pytest.approx(fit.ability[0], abs=1e-8)
    assert np.isfinite(fit.ability[2]) and fit.ability[2] == fit.ability.max()


def test_keys_sharing_no_edition_are_in_different_link_groups() -> None:
    sim = simulate(4, n_keys=4, n_editions=4, per_edition=30)
    covered = sim.covered.copy()
    covered[:2, sim.group >= 2] = False  # keys 0, 1 took editions 0-1 only; keys 2, 3 editions 2-3
    covered[2:, sim.group < 2] = False
    fit = fit_rasch(sim.correct & covered, covered, sim.group)
    assert fit.link_group[0] == fit.link_group[1] != fit.link_group[2] == fit.link_group[3]
    assert fit.converged and np.isfinite(fit.ability_se).all()


def test_leave_one_out_difficulties_match_a_refit_without_the_key() -> None:
    """The cheap leave-one-out (other abilities kept, edition means and σ re-solved) against a real
    refit: equal up to the scale's origin, within 0.05 logits per question with 8 keys (what is left is
    the other keys' abilities moving) and 0.005 with 20."""
    for n_keys, tolerance in ((8, 0.05), (20, 0.005)):
        sim = simulate(5, n_keys=n_keys, n_editions=4, per_edition=40)
        fit = _fit(sim)
        posteriors = leave_one_out(fit, 0, sim.correct, sim.covered)
        refit = fit_rasch(sim.correct[1:], sim.covered[1:], sim.group)
        gap = posteriors.mean - refit.difficulty[posteriors.items]
        assert np.abs(gap - gap.mean()).max() < tolerance, n_keys


def test_leave_one_out_stays_finite_when_the_only_other_key_got_everything_wrong() -> None:
    """Two keys on one edition of 80 questions, one wrong on all (a model whose replies never parse), the
    other right on all: without either, the edition mean and σ have no finite maximum. The re-solve used
    to walk off until e^{2ρ} overflowed and the posteriors were NaN; they stay finite, with no warning."""
    group = np.zeros(80, dtype=np.int64)
    covered = np.ones((2, 80), dtype=bool)
    correct = np.zeros((2, 80), dtype=bool)
    correct[1] = True
    fit = fit_rasch(correct, covered, group)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        posteriors = [leave_one_out(fit, key, correct, covered) for key in (0, 1)]
    for posterior in posteriors:
        assert posterior.items.size == 80 and np.isfinite(posterior.weights).all()
        assert np.allclose(posterior.weights.sum(axis=1), 1.0)


def _cutoff_tests(seeds: range, effect: float, planted: list[int], **sizes: int) -> list:
    """The cutoff test of the `planted` keys (all keys when none is planted) over simulated benchmarks."""
    results = []
    n_keys = sizes.get("n_keys", 12)
    for seed in seeds:
        effects = np.zeros(n_keys)
        effects[planted] = effect
        sim = simulate(seed, effects=effects, **sizes)  # type: ignore[arg-type]
        fit = _fit(sim)
        for key in planted or range(n_keys):
            data = key_cutoff_data(fit, key, sim.correct, sim.covered, sim.after(key))
            results.append(cutoff_effect([data], [fit.ability[key]]))
    return results


def test_cutoff_test_rejects_about_5_percent_when_there_is_no_effect() -> None:
    """300 tests (15 benchmarks × 20 keys, 29 editions × 20 questions, cutoffs staggered): SE 1.3
    points, so 1.5–9% holds the 5% level with room for ±3 SE; the intervals cover 0 as often."""
    results = _cutoff_tests(range(15), 0.0, [], n_keys=20, n_editions=29, per_edition=20)
    assert len(results) == 300
    rejected = np.mean([r.p_value < 0.05 for r in results])
    assert 0.015 <= rejected <= 0.09, rejected
    covered = np.mean([r.ci_low <= 0 <= r.ci_high for r in results])
    assert covered == pytest.approx(1 - rejected)


@pytest.mark.simulation
def test_cutoff_test_rejects_5_percent_at_full_size() -> None:
    """1,200 tests (50 benchmarks × 24 keys, 29 editions × 80): SE 0.63 points, 3.1–6.9%."""
    results = _cutoff_tests(range(50), 0.0, [], n_keys=24, n_editions=29, per_edition=80)
    rejected = np.mean([r.p_value < 0.05 for r in results])
    assert 0.031 <= rejected <= 0.069, rejected


def test_cutoff_test_finds_a_drop_of_half_a_logit_with_29_editions() -> None:
    """A key that does 0.5 log-odds worse after its cutoff (29 editions × 80 questions, 12 keys, the
    others unaffected): found (p < 0.05, effect < 0) in at least 8 of 10 benchmarks, at least 8 of the
    10 intervals covering −0.5. These seeds give 10 and 9; the bounds are what 10 draws allow at the
    measured power (92% for this key, full-size test) and coverage (~95%): a right method fails them
    with probability ~5% on other seeds (10 of 10 held on 6 of 12 other windows of 10 seeds), while a
    method with half that power fails them 97% of the time (interval width: the coverage tests)."""
    results = _cutoff_tests(range(10), -0.5, [0], n_keys=12, n_editions=29, per_edition=80)
    assert sum(r.p_value is not None and r.p_value < 0.05 and r.effect < 0 for r in results) >= 8
    assert sum(r.ci_low is not None and r.ci_low <= -0.5 <= r.ci_high for r in results) >= 8


@pytest.mark.simulation
def test_cutoff_power_and_coverage_at_full_size() -> None:
    """100 planted drops of −0.5 (50 benchmarks × 2 keys of 12: the earliest cutoff, 20 editions after
    it, and the latest, 6 after): power ≥ 85% (measured 90%: SE 3 points), coverage 90–99% (94%)."""
    results = _cutoff_tests(range(50), -0.5, [0, 11], n_keys=12, n_editions=29, per_edition=80)
    assert len(results) == 100
    assert np.mean([r.p_value < 0.05 for r in results]) >= 0.85
    assert 0.90 <= np.mean([r.ci_low <= -0.5 <= r.ci_high for r in results]) <= 0.99


def test_three_editions_cannot_tell() -> None:
    """The study's shape: 11 keys, 3 editions. A cutoff between the first and second exam leaves a
    wide interval; a cutoff before all three leaves nothing to contrast."""
    dates = [dt.date(2025, 4, 27), dt.date(2025, 8, 17), dt.date(2025, 12, 21)]
    sim = simulate(
        11,
        n_keys=11,
        n_editions=3,
        effects=np.r_[-0.5, np.zeros(10)],
        cutoffs=[dt.date(2025, 5, 31)] + [None] * 10,
    )
    sim = Simulation(**{**sim.__dict__, "exam_date": dates})
    fit = _fit(sim)
    between = cutoff_effect(
        [key_cutoff_data(fit, 0, sim.correct, sim.covered, sim.after(0))], [fit.ability[0]]
    )
    assert between.effect is not None and between.ci_high - between.ci_low > 1.0
    assert (between.n_before, between.n_after) == (80, 160)
    every_exam_after = np.ones(sim.group.size, dtype=bool)
    none = cutoff_effect(
        [key_cutoff_data(fit, 1, sim.correct, sim.covered, every_exam_after)], [fit.ability[1]]
    )
    assert none.effect is None and none.ci_low is None and none.note is not None
    assert "cannot be estimated" in none.note


def test_a_side_of_the_cutoff_all_right_or_all_wrong_gives_no_finite_effect_and_no_error() -> None:
    """Separation: a strong key (θ 4.8) answers all 300 questions after its cutoff right (seed 2905, key 7,
    found by running the zero-effect test on other seeds: the Fisher scoring divided by zero, which would
    fail the whole analysis step). δ's likelihood then grows without bound: no estimate, the note says
    which way the interval is unbounded; the pooled effect still comes from the keys with both sides mixed."""
    sim = simulate(2905, n_keys=20, n_editions=29, per_edition=20)
    fit = _fit(sim)
    data = key_cutoff_data(fit, 7, sim.correct, sim.covered, sim.after(7))
    assert data.after.sum() == 300 and data.correct[data.after == 1].all()
    alone = cutoff_effect([data], [fit.ability[7]])
    assert (alone.effect, alone.ci_low, alone.ci_high, alone.p_value) == (None, None, None, None)
    assert alone.note == (
        "every answer after the cutoff (300) is right: the effect has no finite estimate "
        "(the interval is unbounded above)"
    )
    others = [key_cutoff_data(fit, k, sim.correct, sim.covered, sim.after(k)) for k in range(3)]
    pooled = cutoff_effect([data, *others], fit.ability[[7, 0, 1, 2]])
    without = cutoff_effect(others, fit.ability[[0, 1, 2]])
    assert pooled.effect is not None and without.effect is not None and pooled.ci_high is not None
    assert np.isfinite([pooled.effect, pooled.ci_low, pooled.ci_high, pooled.p_value]).all()
    assert pooled.effect > without.effect  # all right after the cutoff: evidence for a higher δ
    assert (pooled.n_after, pooled.n_before) == (
        sum(int(d.after.sum()) for d in [data, *others]),
        sum(int((1 - d.after).sum()) for d in [data, *others]),
    )
    # Every answer on or before the cutoff wrong: unbounded above too (worse before, better after).
    correct = sim.correct.copy()
    correct[0, ~sim.after(0)] = False
    wrong_before = key_cutoff_data(fit, 0, correct, sim.covered, sim.after(0))
    effect = cutoff_effect([wrong_before], [fit.ability[0]])
    assert effect.effect is None and effect.note is not None
    assert effect.note.startswith("every answer on or before the cutoff") and "unbounded above" in effect.note
    # Every answer right: the key says nothing about δ, alone or pooled with itself.
    correct[0] = sim.covered[0]
    perfect = key_cutoff_data(fit, 0, correct, sim.covered, sim.after(0))
    assert cutoff_effect([perfect, perfect], [fit.ability[0]] * 2).note == (
        "no key has right and wrong answers on both sides of its cutoff: the effect has no finite "
        "estimate (the interval is unbounded)"
    )


def test_pooled_effect_is_found_and_its_interval_is_narrower_than_each_keys() -> None:
    sim = simulate(13, n_keys=8, n_editions=29, per_edition=40, effects=np.r_[-0.5, -0.5, -0.5, np.zeros(5)])
    fit = _fit(sim)
    datas = [key_cutoff_data(fit, k, sim.correct, sim.covered, sim.after(k)) for k in range(3)]
    pooled = cutoff_effect(datas, fit.ability[:3])
    single = [cutoff_effect([d], [fit.ability[k]]) for k, d in enumerate(datas)]
    assert pooled.p_value < 0.001 and pooled.ci_low <= -0.5 <= pooled.ci_high
    assert all(pooled.ci_high - pooled.ci_low < s.ci_high - s.ci_low for s in single)


def _audit(seeds: range, wrong: int) -> tuple[int, int, int, int]:
    found = planted = false = right = 0
    for seed in seeds:
        sim = simulate(
            seed,
            n_keys=11,
            n_editions=3,
            ability_mean=2.0,
            ability_sd=0.8,
            wrong_keys=wrong,
            wrong_key_max_difficulty=0.5,
        )
        fit = _fit(sim)
        audit = audit_keys(sim.letters, sim.key_letter, np.ones(sim.group.size, bool), fit.ability)
        is_wrong = np.zeros(sim.group.size, dtype=bool)
        is_wrong[sim.wrong_keys] = True
        found += int((audit["suspicious"] & is_wrong).sum())
        planted += int(is_wrong.sum())
        false += int((audit["suspicious"] & ~is_wrong).sum())
        right += int((~is_wrong).sum())
    return found, planted, false, right


def test_a_planted_wrong_key_is_flagged_and_right_keys_are_not() -> None:
    """10 benchmarks of the study's shape (11 keys, 3 editions), 4 wrong keys planted in each on
    questions of ordinary difficulty: at least 35 of the 40 flagged, at most 4 of the 2,360 right keys
    (these seeds: 39 and 1, a hard question whose trap drew the strong keys). The bounds are what 40
    and 2,360 draws allow at the rule's rates (95% found, ~0.06% false; full-size test): a right rule
    fails them with probability ~1.5% each on other seeds (39 and 1 held on 7 of 12 other windows)."""
    found, planted, false, right = _audit(range(10), 4)
    assert planted == 40 and found >= 35
    assert right == 2360 and false <= 4


@pytest.mark.simulation
def test_key_audit_rates_at_full_size() -> None:
    """100 benchmarks, 8 wrong keys each: ≥ 93% of 800 found (SE 0.8 points), ≤ 0.1% of 23,200 right
    keys flagged."""
    found, planted, false, right = _audit(range(100), 8)
    assert found / planted >= 0.93 and false / right <= 0.001


def test_the_same_answers_give_the_same_bits() -> None:
    """Deterministic: a second fit of the same answers returns identical arrays (data versions hash them)."""
    sim = simulate(17, n_keys=9, n_editions=4, per_edition=30, coverage=0.9)
    first, second = _fit(sim), _fit(sim)
    for name in ("ability", "ability_se", "difficulty", "difficulty_sd", "group_mean"):
        assert np.array_equal(getattr(first, name), getattr(second, name), equal_nan=True), name


def test_keys_answering_every_question_alike_get_an_ability_and_no_interval() -> None:
    """Two keys with the same answers to every question: nothing bounds the questions' spread, so the
    information is singular; the abilities are equal and finite, the interval left out (NULL), silently."""
    sim = simulate(19, n_keys=1, n_editions=1, per_edition=80)
    correct = np.vstack([sim.correct[0], sim.correct[0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = fit_rasch(correct, np.ones_like(correct), sim.group)
    assert fit.ability[0] == fit.ability[1] and np.isfinite(fit.ability).all()
    assert np.isnan(fit.ability_se).all() or (fit.ability_se > 0).all()


def _near_chance_ability(weight: float) -> float:
    """The ability whose vote weight is `weight`: w = (expit(θ) − 1/4) / (3/4)."""
    accuracy = 0.25 + 0.75 * weight
    return float(np.log(accuracy / (1 - accuracy)))


def test_the_baselines_plus_one_real_model_flag_no_key() -> None:
    """The README's two baselines and one model: where all three chose the same other letter, the fit gave
    the baselines small positive weights (about 0.002 and 0.015), enough to count as 3 keys agreeing at
    100% consensus. Baselines never vote or count: with one real model nothing is flagged."""
    from oabench_pipeline.core.analysis.key_audit import key_audit

    # Keys: baseline/random, baseline/longest-choice, one model; questions keyed A, B, C, D.
    letters = np.array([[2, 3, 0, 1], [2, 0, 1, 1], [2, 0, 2, 3]])
    ability = np.array([_near_chance_ability(0.002), _near_chance_ability(0.015), 1.5])
    questions = pl.DataFrame(
        {
            "qid": [f"oab-43-1f-q{n}" for n in range(1, 5)],
            "edition": [43] * 4,
            "number": [1, 2, 3, 4],
            "correct": ["A", "B", "C", "D"],
            "status": ["active"] * 4,
            "key_status": ["definitive"] * 4,
        }
    )
    as_models = key_audit(questions, letters, ability, np.zeros(4))
    assert as_models.filter(pl.col("suspicious"))["qid"].to_list() == ["oab-43-1f-q1"]  # three keys
    audit = key_audit(questions, letters, ability, np.zeros(4), np.array([False, False, True]))
    assert not audit["suspicious"].any()
    assert audit["n_models"].to_list() == [1] * 4
    assert audit.filter(pl.col("qid") == "oab-43-1f-q1")["agreeing_models"].item() == 1
    keys = np.array([0, 1, 2, 3])
    only_model = audit_keys(letters, keys, np.ones(4, bool), ability, np.array([False, False, True]))
    assert not only_model["suspicious"].any()

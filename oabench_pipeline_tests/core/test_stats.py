"""Known values and properties of the vectorised statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from oabench_pipeline.core import stats


def test_mcnemar_exact_known_values_and_vectorised() -> None:
    # b=10, c=2: 2 * P(X <= 2), X ~ Bin(12, 1/2) = 2 * 79 / 4096
    p = stats.mcnemar_exact_p(np.array([10, 2, 0, 5, 3]), np.array([2, 10, 0, 5, 0]))
    assert p[0] == pytest.approx(158 / 4096)
    assert p[1] == pytest.approx(p[0])  # symmetric in b and c
    assert p[2] == 1.0  # no discordant pairs
    assert p[3] == 1.0  # balanced discordance
    assert p[4] == pytest.approx(0.25)  # 2 * (1/2)^3


def test_holm_known_vector_and_nan() -> None:
    adjusted = stats.holm_adjust([0.01, 0.04, 0.03, 0.005, np.nan])
    np.testing.assert_allclose(adjusted[:4], [0.03, 0.06, 0.06, 0.02])
    assert np.isnan(adjusted[4])
    assert (stats.holm_adjust([0.9, 0.8]) <= 1.0).all()


def test_bootstrap_ci_seeded_contains_estimate_and_shrinks_with_n() -> None:
    low, high = stats.bootstrap_accuracy_ci([30, 300, 3000], [40, 400, 4000], samples=4000, seed=7)
    again = stats.bootstrap_accuracy_ci([30, 300, 3000], [40, 400, 4000], samples=4000, seed=7)
    np.testing.assert_array_equal(low, again[0])
    assert ((low <= 0.75) & (high >= 0.75)).all()
    widths = high - low
    assert widths[0] > widths[1] > widths[2]
    # The binomial interval has the normal-approximation width for large n.
    assert widths[2] == pytest.approx(2 * 1.96 * math.sqrt(0.75 * 0.25 / 4000), rel=0.1)
    empty_low, _ = stats.bootstrap_accuracy_ci([0], [0], samples=10, seed=0)
    assert np.isnan(empty_low[0])


def test_pass_probability_matches_exact_binomial() -> None:
    scores = np.array([[60, 40], [20, 41]])
    totals = np.array([[80, 80], [80, 0]])  # second key did not sit the second edition
    per_edition, joint = stats.bootstrap_pass_probability(scores, totals, 40, samples=20000, seed=1)
    exact = sps.binom.sf(39, 80, scores / 80)
    assert per_edition[0, 0] == pytest.approx(exact[0, 0], abs=0.01)
    assert per_edition[0, 1] == pytest.approx(exact[0, 1], abs=0.02)
    assert per_edition[1, 0] == pytest.approx(0.0, abs=0.001)
    assert per_edition[1, 1] == 0.0
    assert joint[0] == pytest.approx(exact[0, 0] * exact[0, 1], abs=0.02)
    only_first, joint_first = stats.bootstrap_pass_probability(
        scores, totals, 40, samples=2000, seed=1, joint_columns=[True, False]
    )
    assert joint_first[0] == pytest.approx(only_first[0, 0])
    _, none = stats.bootstrap_pass_probability(
        scores, totals, 40, samples=10, seed=1, joint_columns=[False, False]
    )
    assert (none == 0).all()


def test_spearman() -> None:
    rho, p = stats.spearman([1, 2, 3, 4, 5], [10, 20, 30, 40, 50])
    assert rho == pytest.approx(1.0)
    assert p < 0.01
    rho, _ = stats.spearman([1, 2, 3, 4, 5, np.nan], [5, 4, 3, 2, 1, 0])
    assert rho == pytest.approx(-1.0)
    assert all(math.isnan(v) for v in stats.spearman([1, 2], [1, 2]))
    assert all(math.isnan(v) for v in stats.spearman([1, 1, 1], [1, 2, 3]))


def test_point_biserial_rest_sign() -> None:
    # Item 0 is answered right by exactly the strong keys: positive discrimination.
    correct = np.array([[1, 1, 1, 1], [1, 1, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]], dtype=bool)
    exists = np.ones_like(correct)
    r = stats.point_biserial_rest(correct, exists, correct.sum(1).astype(float), exists.sum(1).astype(float))
    assert r[0] > 0.5
    assert np.isnan(stats.point_biserial_rest(correct[:2], exists[:2], np.ones(2), np.ones(2) * 4)).all()

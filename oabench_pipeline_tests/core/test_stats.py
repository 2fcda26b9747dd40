"""Known values and properties of the vectorised statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest

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

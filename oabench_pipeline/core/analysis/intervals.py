"""Intervals of accuracy and the probability of passing, in closed form (no resampling).

Both are deterministic and depend on one key's counts only, so adding or removing another model never
moves them (a shared bootstrap random stream did).

- Wilson score interval (95%, z = 1.959963984540054) of technical accuracy = correct ÷ active. Near the
  ceiling (p ≥ 0.97 on ~240 questions) the percentile bootstrap covered 0.91–0.93 of the time for a nominal
  0.95; Wilson keeps close to nominal there.
- Official scale: annulled questions are credited to everyone, with certainty, so only the active
  questions carry uncertainty: bound_official = (annulled + active × bound_technical) ÷ total.
- p_pass: Π over editions of P(Binomial(n_e, score_e ÷ n_e) ≥ threshold_e): the chance of passing every
  edition again if each question were redrawn at the model's observed rate in that edition.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Z_95 = 1.959963984540054

FloatArray = npt.NDArray[np.float64]


def wilson_interval(
    successes: npt.ArrayLike, trials: npt.ArrayLike, z: float = Z_95
) -> tuple[FloatArray, FloatArray]:
    """Wilson score interval of successes ÷ trials, element-wise; NaN where trials is 0."""
    k = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    safe_n = np.maximum(n, 1.0)
    p = np.clip(k / safe_n, 0.0, 1.0)
    z2 = z * z
    denominator = 1.0 + z2 / safe_n
    centre = (p + z2 / (2.0 * safe_n)) / denominator
    half = z / denominator * np.sqrt(p * (1.0 - p) / safe_n + z2 / (4.0 * safe_n * safe_n))
    low = np.clip(centre - half, 0.0, 1.0)
    high = np.clip(centre + half, 0.0, 1.0)
    empty = n <= 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def official_interval(
    technical_low: npt.ArrayLike, technical_high: npt.ArrayLike, active: npt.ArrayLike, total: npt.ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """A technical-accuracy interval on the official scale: annulled questions credited with certainty."""
    act = np.asarray(active, dtype=np.float64)
    tot = np.asarray(total, dtype=np.float64)
    annulled = tot - act
    safe_total = np.maximum(tot, 1.0)
    # With no active question the official accuracy is exactly annulled ÷ total (1.0), no uncertainty.
    t_low = np.where(act > 0, np.asarray(technical_low, dtype=np.float64), 0.0)
    t_high = np.where(act > 0, np.asarray(technical_high, dtype=np.float64), 0.0)
    low = (annulled + act * t_low) / safe_total
    high = (annulled + act * t_high) / safe_total
    empty = tot <= 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def pass_probability(scores: npt.ArrayLike, totals: npt.ArrayLike, thresholds: npt.ArrayLike) -> FloatArray:
    """P(Binomial(total, score ÷ total) ≥ threshold), element-wise; 0 where total is 0 (edition not sat)."""
    s = np.asarray(scores, dtype=np.float64)
    n = np.asarray(totals, dtype=np.float64)
    t = np.broadcast_to(np.asarray(thresholds, dtype=np.float64), s.shape)
    p = np.clip(s / np.maximum(n, 1.0), 0.0, 1.0)
    from scipy import special  # imported when needed: scipy takes most of a second to import

    # P(X >= t) = P(X > t - 1) = bdtrc(t - 1, n, p), without the cancellation of 1 - cdf; P(X >= 0) = 1.
    at_least = np.where(t > 0, special.bdtrc(np.maximum(t - 1, 0), n, p), 1.0)
    return np.where(n > 0, at_least, 0.0)

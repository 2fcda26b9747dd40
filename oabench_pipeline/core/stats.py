"""Vectorised statistics for the leaderboard: exact McNemar, Holm, Spearman, item-rest correlation.

Every function takes and returns numpy arrays so that 500 model keys (124,750 pairs) cost a
handful of array operations, never a Python loop per key or per pair. Intervals and pass
probabilities are closed forms in `analysis/intervals.py`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def mcnemar_exact_p(b: npt.ArrayLike, c: npt.ArrayLike) -> FloatArray:
    """Exact two-sided McNemar p-value: binomial test of min(b, c) out of b + c at p = 1/2.

    p = min(1, 2 * P(X <= min(b, c))), X ~ Binomial(b + c, 1/2); no discordant pairs gives 1.
    """
    b_arr = np.asarray(b, dtype=np.float64)
    c_arr = np.asarray(c, dtype=np.float64)
    n = b_arr + c_arr
    k = np.minimum(b_arr, c_arr)
    # bdtr(k, n, p) is the binomial CDF, exact to double precision but ~5 us a call: evaluate it
    # once per distinct (k, n) (pairs of 500 keys repeat them a lot), then scatter back.
    # One int64 code per (k, n) pair makes np.unique a flat sort instead of a row-wise one.
    stride = np.int64(n.max(initial=0)) + 1
    codes = k.astype(np.int64).ravel() * stride + n.astype(np.int64).ravel()
    unique, inverse = np.unique(codes, return_inverse=True)
    with np.errstate(invalid="ignore"):
        from scipy import special

        p_unique = np.minimum(1.0, 2.0 * special.bdtr(unique // stride, unique % stride, 0.5))
    p = p_unique[inverse.ravel()].reshape(n.shape)
    return np.where(n > 0, p, 1.0)


def holm_adjust(pvalues: npt.ArrayLike) -> FloatArray:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1), same order as input.

    NaN entries are ignored (they neither count towards m nor get a value).
    """
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    valid = ~np.isnan(p)
    pv = p[valid]
    m = pv.size
    if m == 0:
        return out
    order = np.argsort(pv, kind="stable")
    scaled = (m - np.arange(m)) * pv[order]
    adjusted = np.minimum(np.maximum.accumulate(scaled), 1.0)
    valid_adjusted = np.empty(m)
    valid_adjusted[order] = adjusted
    out[valid] = valid_adjusted
    return out


def spearman(x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[float, float]:
    """Spearman rank correlation and its two-sided p-value (t approximation, ties averaged).

    Pairs with a NaN in either value are dropped; fewer than 3 pairs or a constant input gives NaNs.
    """
    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    keep = ~(np.isnan(xa) | np.isnan(ya))
    xa, ya = xa[keep], ya[keep]
    if xa.size < 3 or np.ptp(xa) == 0 or np.ptp(ya) == 0:
        return float("nan"), float("nan")
    from scipy import stats

    result = stats.spearmanr(xa, ya)
    return float(result.statistic), float(result.pvalue)


def point_biserial_rest(
    correct: npt.NDArray[np.bool_],
    exists: npt.NDArray[np.bool_],
    key_correct: FloatArray,
    key_total: FloatArray,
) -> FloatArray:
    """Corrected item-rest correlation for every item (column) of a keys x items 0/1 matrix.

    For item q and every key i that answered it, correlates correct[i, q] with the key's accuracy
    on the *other* items ((key_correct[i] - correct[i, q]) / (key_total[i] - 1)), so an item does
    not correlate with itself (matters when there are few items). NaN where undefined.
    """
    e = exists.astype(np.float64)
    x = correct.astype(np.float64) * e
    denom = np.maximum(key_total[:, None] - e, 1.0)
    rest = (key_correct[:, None] - x) / denom * e
    n = e.sum(axis=0)
    sx = x.sum(axis=0)
    sy = rest.sum(axis=0)
    sxy = (x * rest).sum(axis=0)
    syy = (rest * rest).sum(axis=0)
    cov = n * sxy - sx * sy
    var = (n * sx - sx * sx) * (n * syy - sy * sy)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = cov / np.sqrt(var)
    return np.where((var > 1e-12) & (n >= 3), r, np.nan)

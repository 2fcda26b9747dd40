"""Vectorised statistics for the leaderboard: exact McNemar, Holm, Spearman, Fisher's exact test,
the normal tail, item-rest correlation.

Every function takes and returns numpy arrays so that 500 model keys (124,750 pairs) cost a
handful of array operations, never a Python loop per key or per pair. Intervals and pass
probabilities are closed forms in `analysis/intervals.py`.

Built on `scipy.special` (its distribution functions), never on `scipy.stats`: importing `scipy.stats`
costs 0.5-1 s on this 2-core machine, paid by every `oabench run` that rebuilds the leaderboard
(issue 19's baselines over 29 editions, target 30 s). Each function here is the closed form
`scipy.stats` evaluates, and `test_stats.py` checks it against `scipy.stats` itself.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import polars as pl

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
    """Spearman rank correlation and its two-sided p-value (t approximation, ties averaged), as
    `scipy.stats.spearmanr` gives them: Pearson's r of the average ranks, and Student's t with n - 2
    degrees of freedom for the p-value.

    Pairs with a NaN in either value are dropped; fewer than 3 pairs or a constant input gives NaNs.
    """
    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    keep = ~(np.isnan(xa) | np.isnan(ya))
    xa, ya = xa[keep], ya[keep]
    if xa.size < 3 or np.ptp(xa) == 0 or np.ptp(ya) == 0:
        return float("nan"), float("nan")
    from scipy import special

    rho = float(np.clip(np.corrcoef(average_ranks(xa), average_ranks(ya))[0, 1], -1.0, 1.0))
    if abs(rho) == 1.0:
        return rho, 0.0  # t is infinite
    dof = xa.size - 2
    t = rho * np.sqrt(dof / ((rho + 1.0) * (1.0 - rho)))
    return rho, float(2.0 * special.stdtr(dof, -abs(t)))


def average_ranks(values: FloatArray) -> FloatArray:
    """1-based ranks, ties given the mean of the ranks they span (`scipy.stats.rankdata`'s "average")."""
    return pl.Series(values).rank("average").to_numpy().astype(np.float64)


def fisher_exact_p(a: int, b: int, c: int, d: int) -> float:
    """Two-sided Fisher exact p-value of the 2x2 table [[a, b], [c, d]], as `scipy.stats.fisher_exact`
    and R's `fisher.test` give it: the probability, with the margins fixed (hypergeometric), of every
    table no more likely than this one (likelihoods equal to 1 part in 10^7 count as equal, as in R).
    1 when a row or a column is empty."""
    first_row, first_column = a + b, a + c
    total = first_row + c + d
    if 0 in (first_row, c + d, first_column, b + d):
        return 1.0
    from scipy import special

    low, high = max(0, first_column - (c + d)), min(first_row, first_column)
    support = np.arange(low, high + 1, dtype=np.float64)
    log_pmf = (
        _log_choose(first_row, support)
        + _log_choose(total - first_row, first_column - support)
        - _log_choose(total, first_column)
    )
    observed = log_pmf[a - low]
    as_extreme = log_pmf <= observed + np.log1p(1e-7)
    return float(min(1.0, np.exp(special.logsumexp(log_pmf[as_extreme]))))


def _log_choose(n: float | FloatArray, k: float | FloatArray) -> FloatArray:
    from scipy import special

    return np.asarray(special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1))


def normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z (`scipy.stats.norm.sf`), exact in the far tail too."""
    from scipy import special

    return float(special.ndtr(-z))


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

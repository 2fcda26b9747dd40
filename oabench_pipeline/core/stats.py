"""Vectorised statistics for the leaderboard: bootstrap intervals, exact McNemar, Holm, Spearman.

Every function takes and returns numpy arrays so that 500 model keys (124,750 pairs) cost a
handful of array operations, never a Python loop per key or per pair.

Bootstrap over questions: resampling n questions with replacement from a 0/1 vector with k ones
yields a count distributed exactly Binomial(n, k/n). Drawing that binomial directly is the same
bootstrap, without materialising n x samples resampled indices.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _rng(seed: int) -> np.random.Generator:
    """One generator type everywhere so that results are reproducible across numpy versions."""
    return np.random.Generator(np.random.PCG64(seed))


def bootstrap_accuracy_ci(
    correct_counts: npt.ArrayLike,
    totals: npt.ArrayLike,
    samples: int,
    seed: int,
    level: float = 0.95,
) -> tuple[FloatArray, FloatArray]:
    """Percentile bootstrap interval of accuracy = correct/total, one interval per element.

    Elements with total 0 get NaN bounds (no questions, no interval).
    """
    k = np.asarray(correct_counts, dtype=np.int64)
    n = np.asarray(totals, dtype=np.int64)
    safe_n = np.maximum(n, 1)
    p = np.clip(k / safe_n, 0.0, 1.0)
    draws = _rng(seed).binomial(safe_n[..., None], p[..., None], size=(*n.shape, samples))
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(draws, [alpha, 1.0 - alpha], axis=-1) / safe_n
    empty = n <= 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def bootstrap_pass_probability(
    scores: npt.ArrayLike,
    totals: npt.ArrayLike,
    thresholds: npt.ArrayLike,
    samples: int,
    seed: int,
    joint_columns: npt.ArrayLike | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Bootstrap probability of scoring >= threshold, per edition and in every edition at once.

    `scores`/`totals` have shape (keys, editions) (official score and question count per edition;
    a total of 0 marks an edition the key did not sit, which counts as not passed); `thresholds`
    broadcasts against them. Questions are resampled within each edition (a stratified bootstrap)
    and the same replicate index across editions forms one joint replicate. Returns (per-edition
    probability (keys, editions), probability of passing every edition in `joint_columns` (a bool
    mask over editions, default all) (keys,); 0 when that mask is empty).

    Only the pass indicator of each replicate matters, and a resampled score X ~ Binomial(n, s/n)
    passes iff U > F(threshold - 1) for the U that inverse-CDF sampling would use; so a uniform
    draw compared with the exact CDF *is* the bootstrap replicate, ~30x cheaper than drawing
    the binomial (25M draws for 500 keys x 25 editions x 2000 samples).
    """
    s = np.atleast_2d(np.asarray(scores, dtype=np.float64))
    n = np.atleast_2d(np.asarray(totals, dtype=np.float64))
    t = np.broadcast_to(np.asarray(thresholds, dtype=np.float64), s.shape)
    p = np.clip(s / np.maximum(n, 1.0), 0.0, 1.0)
    from scipy import special  # imported when needed: scipy takes most of a second to import

    fail_cdf = np.where(t > 0, special.bdtr(np.maximum(t - 1, 0), n, p), 0.0)
    sat = n > 0
    keys, editions = s.shape
    in_joint = np.ones(editions, bool) if joint_columns is None else np.asarray(joint_columns, bool)
    rng = _rng(seed)
    per_edition = np.zeros((keys, editions))
    joint = np.full((keys, samples), in_joint.any())
    # One edition at a time keeps memory at keys x samples instead of keys x editions x samples;
    # float32 uniforms are plenty for a probability estimated from a few thousand samples.
    for e in range(editions):
        uniforms = rng.random((keys, samples), dtype=np.float32)
        passed = (uniforms >= fail_cdf[:, e, None].astype(np.float32)) & sat[:, e, None]
        per_edition[:, e] = passed.mean(axis=1)
        if in_joint[e]:
            joint &= passed
    return per_edition, joint.mean(axis=1)


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

"""The training-cutoff effect: does a key do worse on exams held after its knowledge cutoff, net of difficulty?

Per key with a `knowledge_cutoff` (docs/item_response.md):

    P(right on question j) = E_b[ expit(α + δ·after_j − b) ],   b ~ the difficulty of j from the other keys

`after_j` is 1 when the question's exam was held after the cutoff. The difficulty distribution of each
question comes from the Rasch fit *without that key* (`item_response.leave_one_out`), so the key's own
answers never set its baseline; averaging over it (rather than plugging in its mean) keeps the
uncertainty of a difficulty estimated from few keys from shrinking δ towards 0. α is the key's level,
δ the change in log-odds after the cutoff (negative: worse on unseen exams, a sign of contamination).
Fitted by Fisher scoring; 95% Wald interval and two-sided Wald p-value. The pooled effect shares one δ
across the keys (each its own α), fitted the same way.

What δ measures: a key's change relative to what the other keys' answers make of the same questions. A
drop shared by every key on the same exams is indistinguishable from those exams being harder, and is
absorbed into their difficulty; staggered cutoffs are what make the effect visible. With no question
on one side of the cutoff (every exam after it, say) δ cannot be estimated at all: the row says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from oabench_pipeline.core.analysis.item_response import (
    Z95,
    FloatArray,
    ItemPosteriors,
    RaschFit,
    leave_one_out,
)
from oabench_pipeline.core.stats import normal_sf

_MAX_ITERATIONS = 50


@dataclass(frozen=True)
class CutoffEffect:
    """δ with its Wald interval and p-value; None where it cannot be estimated (`note` says why)."""

    effect: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    n_after: int
    n_before: int
    note: str | None


@dataclass(frozen=True)
class CutoffData:
    """One key's answers on the questions the other keys give a difficulty to."""

    correct: FloatArray  # (n,) 1.0 right
    after: FloatArray  # (n,) 1.0 after the cutoff
    posteriors: ItemPosteriors  # difficulty of each question without this key


def _predict(level: FloatArray, data: CutoffData, delta: float) -> tuple[FloatArray, FloatArray]:
    """P(right) per question and its derivative with respect to the linear predictor."""
    from scipy import special  # scipy is imported by the analyses that use it, not by every command

    eta = (level + delta * data.after)[:, None] - data.posteriors.nodes
    p = special.expit(eta)
    w = data.posteriors.weights
    return (w * p).sum(axis=1), (w * p * (1.0 - p)).sum(axis=1)


def _not_estimable(data: list[CutoffData], why: str) -> CutoffEffect:
    after = int(sum(d.after.sum() for d in data))
    total = int(sum(d.after.size for d in data))
    return CutoffEffect(None, None, None, None, after, total - after, why)


def _scoring_terms(
    contrasted: list[CutoffData], alpha: FloatArray, delta: float
) -> tuple[FloatArray, float, FloatArray, FloatArray, float]:
    """Scores and Fisher information of (α_1..α_M, δ): (score α, score δ, info αα, info αδ, info δδ)."""
    score_a, info_aa, info_ad = np.zeros(alpha.size), np.zeros(alpha.size), np.zeros(alpha.size)
    score_d = info_dd = 0.0
    for m, d in enumerate(contrasted):
        prob, slope = _predict(np.full(d.after.size, alpha[m]), d, delta)
        prob = np.clip(prob, 1e-12, 1 - 1e-12)
        variance = prob * (1.0 - prob)
        residual = (d.correct - prob) * slope / variance
        fisher = slope**2 / variance
        score_a[m] = residual.sum()
        score_d += float((residual * d.after).sum())
        info_aa[m] = fisher.sum()
        info_ad[m] = (fisher * d.after).sum()
        info_dd += float(info_ad[m])
    return score_a, score_d, info_aa, info_ad, info_dd


def cutoff_effect(data: list[CutoffData], starts: npt.ArrayLike) -> CutoffEffect:
    """δ shared by every key in `data` (one key: its own effect), each key its own α (start: its ability).

    Fisher scoring on (α_1..α_M, δ): the information matrix is an arrow (each α meets only δ), solved
    through its Schur complement, so hundreds of keys cost a few array operations per step.
    """
    start_values = np.nan_to_num(np.asarray(starts, dtype=np.float64))
    usable = [d for d in data if d.after.size]
    if not usable:
        return _not_estimable(data, "no question another key also answered")
    n_after = sum(int(d.after.sum()) for d in usable)
    n_before = sum(int(d.after.size - d.after.sum()) for d in usable)
    chosen = [i for i, d in enumerate(data) if 0 < d.after.sum() < d.after.size]
    if not chosen:
        side = "after" if n_before == 0 else "on or before"
        return _not_estimable(
            usable,
            f"every question ({n_after + n_before}) is {side} the cutoff: no before/after contrast, "
            "so the effect cannot be estimated (the interval is unbounded)",
        )
    # A key whose every answer is right (or every one wrong) says nothing about δ (its α is infinite);
    # one with a side all right or all wrong bounds δ on one side only. At least one key with right and
    # wrong answers on both sides must remain, else δ has no finite estimate (separation).
    chosen = [i for i in chosen if 0 < data[i].correct.sum() < data[i].correct.size]
    bounded = [i for i in chosen if _separation(data[i]) is None]
    if not bounded:
        separated = [why for d in data if (why := _separation(d)) is not None]
        return _not_estimable(usable, separated[0] if len(data) == 1 and separated else _NO_CONTRAST)
    contrasted = [data[i] for i in chosen]
    alpha = start_values[chosen].copy()
    delta = 0.0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for _ in range(_MAX_ITERATIONS):
            score_a, score_d, info_aa, info_ad, info_dd = _scoring_terms(contrasted, alpha, delta)
            schur = info_dd - float((info_ad**2 / info_aa).sum())
            step_d = (score_d - float((info_ad * score_a / info_aa).sum())) / schur if schur > 0 else np.nan
            step_a = (score_a - info_ad * step_d) / info_aa
            if not (np.isfinite(step_d) and np.isfinite(step_a).all()):
                break
            alpha += step_a
            delta += step_d
            if max(abs(step_d), float(np.abs(step_a).max())) < 1e-7:
                break
        _, _, info_aa, info_ad, info_dd = _scoring_terms(contrasted, alpha, delta)
        schur = info_dd - float((info_ad**2 / info_aa).sum())
    if not (np.isfinite(delta) and np.isfinite(schur) and schur > 0):
        return _not_estimable(
            usable, "the fit did not converge (no finite estimate): the effect is not given"
        )
    se = float(np.sqrt(1.0 / schur))  # 1 / Schur complement
    p_value = 2.0 * normal_sf(abs(delta) / se)
    return CutoffEffect(delta, delta - Z95 * se, delta + Z95 * se, p_value, n_after, n_before, None)


_NO_CONTRAST = (
    "no key has right and wrong answers on both sides of its cutoff: the effect has no finite estimate "
    "(the interval is unbounded)"
)


def _separation(data: CutoffData) -> str | None:
    """Why this key alone gives δ no finite estimate: a side of its cutoff where every answer is right
    (or every one wrong), which the likelihood fits best with δ at ±∞ (None: both sides are mixed)."""
    for side, is_after in (("after", 1.0), ("on or before", 0.0)):
        mask = data.after == is_after
        n, right = int(mask.sum()), int(data.correct[mask].sum())
        if n and right in (0, n):
            bound = "above" if (right == n) == (is_after == 1.0) else "below"
            outcome = "right" if right == n else "wrong"
            return (
                f"every answer {side} the cutoff ({n}) is {outcome}: the effect has no finite estimate "
                f"(the interval is unbounded {bound})"
            )
    return None


def key_cutoff_data(
    fit: RaschFit,
    key: int,
    correct: npt.ArrayLike,
    covered: npt.ArrayLike,
    after: npt.ArrayLike,
    dated: npt.ArrayLike | None = None,
) -> CutoffData:
    """Key `key`'s answers with each question's difficulty from the other keys; `after[j]`: question j's
    exam was held after this key's cutoff; `dated[j]` (default: all): its exam date is known, so it
    takes part (the key's other answers still leave the difficulties)."""
    posteriors = leave_one_out(fit, key, correct, covered)
    if dated is not None:
        keep = np.asarray(dated, dtype=bool)[posteriors.items]
        posteriors = ItemPosteriors(posteriors.items[keep], posteriors.nodes[keep], posteriors.weights[keep])
    row = np.asarray(correct, dtype=bool)[key, posteriors.items]
    return CutoffData(
        correct=row.astype(np.float64),
        after=np.asarray(after, dtype=bool)[posteriors.items].astype(np.float64),
        posteriors=posteriors,
    )

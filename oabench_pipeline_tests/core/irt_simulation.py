"""Simulated benchmark results with known truth, for the item-response, cutoff and key-audit analyses.

Keys answer questions by the Rasch model: P(right) = expit(θ_i − b_j + δ_i·after_ij), b_j = μ_e + u_j.
`after_ij`: question j's exam was held after key i's cutoff or, given `flagged`, question j is flagged
(possibly superseded by later law: the same split for every key).
A wrong answer goes to the question's most attractive distractor with probability `ATTRACTION`, else to
one of the other two; a planted wrong key publishes another letter than the one the keys were generated
against. Everything is drawn from one seeded generator.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
from scipy import special

ATTRACTION = 0.6


@dataclass(frozen=True)
class Simulation:
    ability: np.ndarray  # (K,) true θ
    edition_mean: np.ndarray  # (G,) true μ_e (question-weighted mean 0)
    difficulty: np.ndarray  # (J,) true b_j
    effect: np.ndarray  # (K,) true δ (0 for keys without a cutoff)
    cutoff: list[dt.date | None]  # (K,)
    exam_date: list[dt.date]  # (G,)
    group: np.ndarray  # (J,) edition index of each question
    covered: np.ndarray  # (K, J) answered
    correct: np.ndarray  # (K, J) answered right
    letters: np.ndarray  # (K, J) 0..3 chosen letter, 5 unanswered
    key_letter: np.ndarray  # (J,) published key 0..3
    true_letter: np.ndarray  # (J,)
    wrong_keys: np.ndarray  # question indices whose published key is wrong

    def after(self, key: int) -> np.ndarray:
        """(J,) the question's exam was held after `key`'s cutoff (False without one)."""
        cutoff = self.cutoff[key]
        if cutoff is None:
            return np.zeros(self.group.size, dtype=bool)
        return np.array([d > cutoff for d in self.exam_date])[self.group]


def exam_dates(n_editions: int) -> list[dt.date]:
    """Editions about every 6.5 months from early 2010 (29 editions: 2010 to late 2025, like the OAB's)."""
    return [dt.date(2010, 3, 1) + dt.timedelta(days=round(200 * g)) for g in range(n_editions)]


def simulate(
    seed: int,
    *,
    n_keys: int = 12,
    n_editions: int = 29,
    per_edition: int | list[int] = 80,
    ability_mean: float = 1.5,
    ability_sd: float = 1.0,
    item_sd: float = 1.2,
    edition_sd: float = 0.4,
    effects: np.ndarray | None = None,
    cutoffs: list[dt.date | None] | None = None,
    wrong_keys: int = 0,
    wrong_key_max_difficulty: float = np.inf,
    coverage: float = 1.0,
    flagged: np.ndarray | None = None,
) -> Simulation:
    """Keys × questions answers by the model above. `effects` and `cutoffs` per key (default: no effect,
    cutoffs spread over the middle of the exam dates); `wrong_keys` questions, among those no harder than
    `wrong_key_max_difficulty`, get a wrong published key; `coverage`: the chance each answer exists;
    `flagged` (J,): the questions `effects` apply to, instead of those after each key's cutoff."""
    rng = np.random.Generator(np.random.PCG64(seed))
    group = np.repeat(np.arange(n_editions), per_edition)  # an int, or each edition's count
    n_items = group.size
    edition_mean = rng.normal(0.0, edition_sd, n_editions)
    edition_mean -= edition_mean.mean()
    difficulty = edition_mean[group] + rng.normal(0.0, item_sd, n_items)
    ability = rng.normal(ability_mean, ability_sd, n_keys)
    dates = exam_dates(n_editions)
    if cutoffs is None:  # spread over the middle of the exam dates, so every key has both sides
        span = (dates[-1] - dates[0]).days
        cutoffs = [dates[0] + dt.timedelta(days=int(span * f)) for f in np.linspace(0.3, 0.8, n_keys)]
    effect = np.zeros(n_keys) if effects is None else np.asarray(effects, dtype=float)
    after = np.array([[c is not None and d > c for d in dates] for c in cutoffs], dtype=bool)[:, group]
    if flagged is not None:
        after = np.broadcast_to(np.asarray(flagged, dtype=bool), (n_keys, n_items))
    logit = ability[:, None] - difficulty[None, :] + effect[:, None] * after
    right = rng.random((n_keys, n_items)) < special.expit(logit)
    covered = rng.random((n_keys, n_items)) < coverage
    true_letter = rng.integers(0, 4, n_items)
    attractive = (true_letter + rng.integers(1, 4, n_items)) % 4
    others = (attractive[None, :] + rng.integers(1, 3, (n_keys, n_items))) % 4
    others = np.where(others == true_letter[None, :], (others + 1) % 4, others)
    wrong = np.where(rng.random((n_keys, n_items)) < ATTRACTION, attractive[None, :], others)
    letters = np.where(right, true_letter[None, :], wrong)
    letters = np.where(covered, letters, 5)
    key_letter = true_letter.copy()
    eligible = np.flatnonzero(difficulty <= wrong_key_max_difficulty)
    planted = (
        np.sort(rng.choice(eligible, size=wrong_keys, replace=False)) if wrong_keys else np.zeros(0, int)
    )
    key_letter[planted] = (true_letter[planted] + 1 + rng.integers(0, 3, planted.size)) % 4
    return Simulation(
        ability=ability,
        edition_mean=edition_mean,
        difficulty=difficulty,
        effect=effect,
        cutoff=list(cutoffs),
        exam_date=dates,
        group=group,
        covered=covered,
        correct=covered & (letters == key_letter[None, :]),
        letters=letters.astype(np.int8),
        key_letter=key_letter,
        true_letter=true_letter,
        wrong_keys=planted,
    )


def law_flags(
    n_editions: int, per_edition: int, *, areas: int = 8, reformed: int = 3, share: float = 0.6
) -> np.ndarray:
    """(J,) a law-currency split shaped like the OAB's: each edition's questions fall into `areas` areas in
    blocks, `reformed` of them rewritten by later law, flagged in the first `share` of the editions."""
    position = np.tile(np.arange(per_edition), n_editions)
    edition = np.repeat(np.arange(n_editions), per_edition)
    in_reformed_area = position * areas // per_edition < reformed
    return in_reformed_area & (edition < round(share * n_editions))

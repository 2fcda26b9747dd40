"""Two simulated judges of the 2nd phase with a planted agreement, for `core/phase2/agreement.py`.

Each answer (model × item × turn) has a true score t ~ N(0, true_sd²); judge j gives t + bias_j + e, with
e ~ N(0, noise_sd²), drawn independently for every judgment. With the two biases fixed, the ICC(2,1) the
two-way ANOVA estimates (McGraw & Wong's ICC(A,1)) is

    true_sd² / (true_sd² + noise_sd² + (bias_a − bias_b)² / 2),

the rater variance being the biases' variance with one degree of freedom. Scores are on a continuous scale,
not clipped to a sub-item's points, so that the planted value is exact. Everything is drawn from one seeded
generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

AREAS = ["direito_administrativo", "direito_civil", "direito_penal"]


@dataclass(frozen=True)
class JudgeSimulation:
    judgments: (
        pl.DataFrame
    )  # the agreement functions' frame: judge_key, model_key, item_id, turn, area, edition, score
    planted_icc: float
    planted_mae: float  # E|a − b| for a − b ~ N(bias_a − bias_b, 2·noise_sd²)


def planted_icc(true_sd: float, noise_sd: float, bias_a: float, bias_b: float) -> float:
    return true_sd**2 / (true_sd**2 + noise_sd**2 + (bias_a - bias_b) ** 2 / 2)


def planted_mae(noise_sd: float, bias_a: float, bias_b: float) -> float:
    """Mean of a folded normal: |X| for X ~ N(μ, σ²), μ = bias_a − bias_b, σ² = 2·noise_sd²."""
    from scipy import stats

    mu, sigma = bias_a - bias_b, np.sqrt(2) * noise_sd
    return float(
        sigma * np.sqrt(2 / np.pi) * np.exp(-(mu**2) / (2 * sigma**2))
        + mu * (1 - 2 * stats.norm.cdf(-mu / sigma))
    )


def simulate(
    seed: int,
    *,
    answers_per_area: int = 60,
    true_sd: float = 1.0,
    noise_sd: float = 0.5,
    bias_a: float = 0.0,
    bias_b: float = 0.3,
) -> JudgeSimulation:
    rng = np.random.Generator(np.random.PCG64(seed))
    rows = []
    for area in AREAS:
        true = rng.normal(0.0, true_sd, answers_per_area)
        for judge, bias in (("judge-a", bias_a), ("judge-b", bias_b)):
            scores = true + bias + rng.normal(0.0, noise_sd, answers_per_area)
            rows += [
                {
                    "judge_key": judge,
                    "model_key": f"model-{i % 6}",
                    "item_id": f"39_{area}_questao_{i}",
                    "turn": 1,
                    "area": area,
                    "edition": 39,
                    "score": float(score),
                }
                for i, score in enumerate(scores)
            ]
    frame = pl.DataFrame(rows, schema_overrides={"turn": pl.Int32, "edition": pl.Int32})
    return JudgeSimulation(
        judgments=frame,
        planted_icc=planted_icc(true_sd, noise_sd, bias_a, bias_b),
        planted_mae=planted_mae(noise_sd, bias_a, bias_b),
    )

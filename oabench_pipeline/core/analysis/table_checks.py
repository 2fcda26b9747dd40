"""What must hold in each analysis table, as checks that list the rows breaking it (no Dagster here).

Each table's asset carries these as asset checks (`scoring/analysis.py`), next to the leaderboard's own.
They hold by construction, so a failure means a bug or a damaged input: every check here is blocking,
and the step writes nothing. `TABLE_CHECKS` gives each check the description the UI's Checks tab shows;
`table_problems` evaluates them on the tables `core/leaderboard.build_leaderboard_tables` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import polars as pl

from oabench_pipeline.core.tables import BY_SUITE

# Holm's step-up and float sums may land a hair outside [0, 1]; anything past this is a real error.
_TOLERANCE = 1e-9


def _label(frame: pl.DataFrame, keys: Sequence[str]) -> pl.Series:
    if frame.is_empty():  # what a passing check has: ~55 of them per rebuild, each a query saved
        return pl.Series(dtype=pl.String)
    return frame.select(pl.concat_str([pl.col(k).cast(pl.String) for k in keys], separator=" × ")).to_series()


def duplicated(frame: pl.DataFrame, keys: Sequence[str]) -> list[str]:
    """The key values held by more than one row."""
    if frame.is_empty():
        return []
    dupes = frame.group_by(list(keys)).len().filter(pl.col("len") > 1).sort(list(keys))
    return [f"{label}: {n} rows" for label, n in zip(_label(dupes, keys), dupes["len"], strict=True)]


def outside(frame: pl.DataFrame, keys: Sequence[str], column: str, low: float, high: float) -> list[str]:
    """Rows whose `column` lies outside [low, high]; NULL and NaN (undefined, e.g. a correlation over
    constant latencies) are not judged."""
    value = pl.col(column).cast(pl.Float64).fill_nan(None)
    bad = frame.filter((value < low - _TOLERANCE) | (value > high + _TOLERANCE)).select(*keys, column)
    return [f"{label}: {column} {value}" for label, value in zip(_label(bad, keys), bad[column], strict=True)]


def violating(frame: pl.DataFrame, keys: Sequence[str], condition: pl.Expr, what: str) -> list[str]:
    """Rows where `condition` (an expression that must hold) is false; NULL counts as holding."""
    bad = frame.filter(~condition.fill_null(True))
    return [f"{label}: {what}" for label in _label(bad, keys)]


def _within_totals(frame: pl.DataFrame, keys: Sequence[str], pairs: Sequence[tuple[str, str]]) -> list[str]:
    problems = []
    for part, whole in pairs:
        condition = (pl.col(part) >= 0) & (pl.col(part) <= pl.col(whole))
        problems += violating(frame, keys, condition, f"{part} outside 0..{whole}")
    return problems


def _interval_holds(
    frame: pl.DataFrame, keys: Sequence[str], estimate: str, low: str, high: str
) -> list[str]:
    condition = (pl.col(low) <= pl.col(estimate) + _TOLERANCE) & (
        pl.col(estimate) <= pl.col(high) + _TOLERANCE
    )
    return violating(frame, keys, condition, f"{estimate} outside [{low}, {high}]")


def _effect_checks(frame: pl.DataFrame, keys: Sequence[str]) -> list[str]:
    return _interval_holds(frame, keys, "effect_log_odds", "effect_ci_low", "effect_ci_high") + outside(
        frame, keys, "p_value", 0, 1
    )


def _pooled_named(frame: pl.DataFrame) -> pl.DataFrame:
    """`contamination_by_cutoff` with its pooled row's NULL model_key named, for the problems' labels."""
    if "pooled" not in frame.columns:
        return frame
    return frame.with_columns(
        model_key=pl.when(pl.col("pooled")).then(pl.lit("(pooled)")).otherwise(pl.col("model_key"))
    )


def _pooled_row_problems(frame: pl.DataFrame) -> list[str]:
    """The pooled row is there exactly when a key's row is, once, with no model_key; keys' rows have one."""
    if "pooled" not in frame.columns:
        return []
    pooled = frame.filter(pl.col("pooled"))
    keys = frame.filter(~pl.col("pooled"))
    problems = []
    if pooled.height != (1 if keys.height else 0):
        problems.append(f"{keys.height} key row(s) and {pooled.height} pooled row(s)")
    if pooled["model_key"].is_not_null().any():
        problems.append("the pooled row has a model_key")
    if keys["model_key"].null_count():
        problems.append(f"{keys['model_key'].null_count()} key row(s) without a model_key")
    return problems


Check = Callable[[pl.DataFrame], list[str]]

_WEIGHTS = ["weight_a", "weight_b", "weight_c", "weight_d"]

# table -> check name -> (description shown in the UI, the function listing the problems)
_CHECKS: dict[str, dict[str, tuple[str, Check]]] = {
    "leaderboard_by_edition": {
        "one_row_per_key_and_edition": (
            "Each model key has at most one row per edition (its canonical run); blocking.",
            lambda f: duplicated(f, ["model_key", "edition"]),
        ),
        "scores_within_totals": (
            "0 ≤ technical score ≤ technical total, official score ≤ official total, and no official score "
            "below the technical one; blocking.",
            lambda f: (
                _within_totals(
                    f,
                    ["model_key", "edition"],
                    [("technical_score", "technical_total"), ("official_score", "official_total")],
                )
                + violating(
                    f,
                    ["model_key", "edition"],
                    pl.col("official_score") >= pl.col("technical_score"),
                    "official_score below technical_score",
                )
            ),
        ),
    },
    "leaderboard_by_area": {
        "one_row_per_key_and_area": (
            "Each model key has one row per legal area; blocking.",
            lambda f: duplicated(f, ["model_key", "area"]),
        ),
        "correct_within_total": (
            "0 ≤ correct ≤ total in every row; blocking.",
            lambda f: _within_totals(f, ["model_key", "area"], [("correct", "total")]),
        ),
    },
    "pairwise_comparison": {
        "one_row_per_pair": (
            "Each unordered pair of distinct ranked keys appears once; blocking.",
            lambda f: (
                duplicated(
                    f.select(
                        a=pl.min_horizontal("model_a", "model_b"), b=pl.max_horizontal("model_a", "model_b")
                    ),
                    ["a", "b"],
                )
                + violating(f, ["model_a"], pl.col("model_a") != pl.col("model_b"), "compared with itself")
            ),
        ),
        "p_values_valid": (
            "p_value and p_holm lie in [0, 1] and Holm's correction never lowers a p-value; blocking.",
            lambda f: (
                outside(f, ["model_a", "model_b"], "p_value", 0, 1)
                + outside(f, ["model_a", "model_b"], "p_holm", 0, 1)
                + violating(
                    f,
                    ["model_a", "model_b"],
                    pl.col("p_holm") >= pl.col("p_value") - _TOLERANCE,
                    "p_holm below p_value",
                )
            ),
        ),
    },
    "item_analysis": {
        "one_row_per_qid": (
            "Each question appears once; blocking.",
            lambda f: duplicated(f, ["qid"]),
        ),
        "shares_within_0_1": (
            "share_correct and modal_share lie in [0, 1]; blocking.",
            lambda f: outside(f, ["qid"], "share_correct", 0, 1) + outside(f, ["qid"], "modal_share", 0, 1),
        ),
    },
    "provider_summary": {
        "one_row_per_provider": (
            "Each provider (case-insensitive) appears once; blocking.",
            lambda f: duplicated(f.select(pl.col("provider").str.to_lowercase()), ["provider"]),
        ),
        "accuracies_ordered": (
            "min_accuracy ≤ mean_accuracy ≤ max_accuracy = best_accuracy, all in [0, 1]; blocking.",
            lambda f: (
                outside(f, ["provider"], "min_accuracy", 0, 1)
                + outside(f, ["provider"], "max_accuracy", 0, 1)
                + violating(
                    f,
                    ["provider"],
                    (pl.col("min_accuracy") <= pl.col("mean_accuracy") + _TOLERANCE)
                    & (pl.col("mean_accuracy") <= pl.col("max_accuracy") + _TOLERANCE)
                    & ((pl.col("max_accuracy") - pl.col("best_accuracy")).abs() <= _TOLERANCE),
                    "min ≤ mean ≤ max = best does not hold",
                )
            ),
        ),
    },
    "edition_deltas": {
        "one_row_per_key": (
            "Each complete model key appears once; blocking.",
            lambda f: duplicated(f, ["model_key"]),
        ),
        "deltas_consistent": (
            "delta = last_accuracy - first_accuracy, and fisher_p lies in [0, 1]; blocking.",
            lambda f: (
                violating(
                    f,
                    ["model_key"],
                    (pl.col("delta") - (pl.col("last_accuracy") - pl.col("first_accuracy"))).abs()
                    <= _TOLERANCE,
                    "delta differs from last_accuracy - first_accuracy",
                )
                + outside(f, ["model_key"], "fisher_p", 0, 1)
            ),
        ),
    },
    "pareto_frontier": {
        "one_row_per_key": (
            "Each model key appears once; blocking.",
            lambda f: duplicated(f, ["model_key"]),
        ),
        "frontier_keys_complete_and_priced": (
            "A key on the frontier is complete and has a cost; blocking.",
            lambda f: violating(
                f,
                ["model_key"],
                ~pl.col("on_frontier") | (pl.col("complete") & pl.col("cost_usd").is_not_null()),
                "on the frontier while incomplete or without a cost",
            ),
        ),
    },
    "latency_accuracy_correlation": {
        "correlation_valid": (
            "spearman_rho lies in [-1, 1] and p_value in [0, 1]; blocking.",
            lambda f: (
                outside(f, ["latency_measure"], "spearman_rho", -1, 1)
                + outside(f, ["latency_measure"], "p_value", 0, 1)
            ),
        ),
    },
    "contamination_by_cutoff": {
        "one_row_per_key": (
            "Each model key with a knowledge cutoff appears once, and the pooled row (model_key NULL) once "
            "when there is any; blocking.",
            lambda f: duplicated(_pooled_named(f), ["model_key"]) + _pooled_row_problems(f),
        ),
        "correct_within_total": (
            "0 ≤ correct ≤ total on both sides of the cutoff; blocking.",
            lambda f: _within_totals(
                _pooled_named(f),
                ["model_key"],
                [("correct_after", "total_after"), ("correct_before", "total_before")],
            ),
        ),
        "effect_interval_valid": (
            "effect_ci_low ≤ effect_log_odds ≤ effect_ci_high and p_value in [0, 1]; blocking.",
            lambda f: _effect_checks(_pooled_named(f), ["model_key"]),
        ),
    },
    "contamination_pooled": {
        "one_valid_row": (
            "One row, with effect_ci_low ≤ effect_log_odds ≤ effect_ci_high and p_value in [0, 1]; blocking.",
            lambda f: (
                ([] if f.height == 1 else [f"{f.height} rows"])
                + _effect_checks(f.with_columns(pooled=pl.lit("pooled")), ["pooled"])
            ),
        ),
    },
    "item_abilities": {
        "one_row_per_key_with_a_valid_interval": (
            "Each model key appears once, with ability_se > 0, ability_ci_low ≤ ability ≤ ability_ci_high "
            "and n_correct ≤ n_questions; blocking.",
            lambda f: (
                duplicated(f, ["model_key"])
                + _interval_holds(f, ["model_key"], "ability", "ability_ci_low", "ability_ci_high")
                + violating(f, ["model_key"], pl.col("ability_se") > 0, "ability_se not positive")
                + _within_totals(f, ["model_key"], [("n_correct", "n_questions")])
            ),
        ),
    },
    "item_difficulties": {
        "one_row_per_qid_with_a_valid_interval": (
            "Each question appears once, with difficulty_sd ≥ 0, difficulty_ci_low ≤ difficulty ≤ "
            "difficulty_ci_high and n_correct ≤ n_models; blocking.",
            lambda f: (
                duplicated(f, ["qid"])
                + _interval_holds(f, ["qid"], "difficulty", "difficulty_ci_low", "difficulty_ci_high")
                + violating(f, ["qid"], pl.col("difficulty_sd") >= 0, "difficulty_sd negative")
                + _within_totals(f, ["qid"], [("n_correct", "n_models")])
            ),
        ),
    },
    "key_audit": {
        "one_row_per_qid_with_weights_as_shares": (
            "Each question appears once; its four letter weights lie in [0, 1] and sum to at most 1 (the "
            "rest: no letter), and the consensus weight is the largest; blocking.",
            lambda f: (
                duplicated(f, ["qid"])
                + [p for c in _WEIGHTS for p in outside(f, ["qid"], c, 0, 1)]
                + violating(f, ["qid"], pl.sum_horizontal(_WEIGHTS) <= 1 + _TOLERANCE, "weights sum above 1")
                + violating(
                    f,
                    ["qid"],
                    pl.col("consensus_weight") >= pl.max_horizontal(_WEIGHTS) - _TOLERANCE,
                    "consensus_weight below a letter's weight",
                )
            ),
        ),
    },
    "runs": {
        "one_row_per_run": (
            "Each run (model key × run id) appears once; blocking.",
            lambda f: duplicated(f, ["model_key", "run_id"]),
        ),
    },
    "run_variance": {
        "one_row_per_key": (
            "Each model key appears once; blocking.",
            lambda f: duplicated(f, ["model_key"]),
        ),
        "spread_consistent": (
            "score_min ≤ score_mean ≤ score_max, score_sd ≥ 0 and flip_rate in [0, 1]; blocking.",
            lambda f: (
                violating(
                    f,
                    ["model_key"],
                    (pl.col("score_min") <= pl.col("score_mean") + _TOLERANCE)
                    & (pl.col("score_mean") <= pl.col("score_max") + _TOLERANCE)
                    & (pl.col("score_sd") >= 0),
                    "score_min ≤ score_mean ≤ score_max, score_sd ≥ 0 does not hold",
                )
                + outside(f, ["model_key"], "flip_rate", 0, 1)
            ),
        ),
    },
}

_CHECKS["suites"] = {
    "one_row_per_suite": (
        "Each suite appears once, and exactly one is the default; blocking.",
        lambda f: (
            duplicated(f, ["suite"])
            + (
                []
                if f.is_empty() or f["is_default"].sum() == 1
                else [f"{f['is_default'].sum()} default suites"]
            )
        ),
    ),
    "counts_consistent": (
        "A suite's ingested editions are among its editions, and its ranked keys among its keys; blocking.",
        lambda f: (
            violating(
                f,
                ["suite"],
                pl.col("editions_ingested").list.set_difference("editions").list.len() == 0,
                "an ingested edition outside the suite",
            )
            + _within_totals(f, ["suite"], [("ranked_keys", "model_keys")])
        ),
    ),
}


_CHECKS["legal_reforms"] = {
    "one_row_per_reform_in_force_after_publication": (
        "Each reform appears once, touches at least one area, and came into force on or after its "
        "publication; blocking.",
        lambda f: (
            duplicated(f, ["reform"])
            + violating(f, ["reform"], pl.col("in_force") >= pl.col("published"), "in_force before published")
            + violating(f, ["reform"], pl.col("areas").list.len() > 0, "no area")
        ),
    ),
}
_CHECKS["question_law_currency"] = {
    "one_row_per_qid_with_reforms_after_its_exam": (
        "Each question appears once; the area flag is set exactly when reforms_after lists a reform, and "
        "a note's verdict decides possibly_superseded; blocking.",
        lambda f: (
            duplicated(f, ["qid"])
            + violating(
                f, ["qid"], pl.col("area_flag") == (pl.col("reforms_after").list.len() > 0), "area_flag wrong"
            )
            + violating(
                f,
                ["qid"],
                pl.when(pl.col("note_verdict").is_null())
                .then(pl.col("possibly_superseded") == pl.col("area_flag"))
                .otherwise(pl.col("possibly_superseded") == (pl.col("note_verdict") == "outdated")),
                "possibly_superseded disagrees with the flag or the note",
            )
        ),
    ),
}
_CHECKS["law_currency_effect"] = {
    "one_row_per_key": (
        "Each model key appears once, and the pooled row (model_key NULL) once when there is any; blocking.",
        lambda f: duplicated(_pooled_named(f), ["model_key"]) + _pooled_row_problems(f),
    ),
    "correct_within_total": (
        "0 ≤ correct ≤ total on possibly-superseded and current-law questions; blocking.",
        lambda f: _within_totals(
            _pooled_named(f),
            ["model_key"],
            [("correct_superseded", "total_superseded"), ("correct_current", "total_current")],
        ),
    ),
    "effect_interval_valid": (
        "effect_ci_low ≤ effect_log_odds ≤ effect_ci_high and p_value in [0, 1]; blocking.",
        lambda f: _effect_checks(_pooled_named(f), ["model_key"]),
    ),
}
_CHECKS["leaderboard_current_law"] = {
    "one_row_per_suite_and_key_within_totals": (
        "Each model key appears once per suite; 0 ≤ technical score ≤ technical total ≤ official total, "
        "official score ≤ official total, accuracies in [0, 1]; blocking.",
        lambda f: (
            duplicated(f, ["suite", "model_key"])
            + _within_totals(
                f,
                ["suite", "model_key"],
                [
                    ("technical_score", "technical_total"),
                    ("official_score", "official_total"),
                    ("technical_total", "official_total"),
                ],
            )
            + outside(f, ["suite", "model_key"], "official_accuracy", 0, 1)
            + outside(f, ["suite", "model_key"], "technical_accuracy", 0, 1)
        ),
    ),
}


def _in_each_suite(check: Check) -> Check:
    """A table's check run on each suite's rows of its `_by_suite` twin, each problem naming the suite."""

    def run(frame: pl.DataFrame) -> list[str]:
        parts = frame.partition_by("suite", maintain_order=True, include_key=False, as_dict=True)
        return [f"suite {suite}: {problem}" for (suite,), rows in parts.items() for problem in check(rows)]

    return run


for _table, _base in BY_SUITE.items():
    if _base in _CHECKS:
        _CHECKS[_table] = {
            name: (f"In each suite: {description}", _in_each_suite(check))
            for name, (description, check) in _CHECKS[_base].items()
        }

TABLE_CHECKS: dict[str, dict[str, str]] = {
    table: {name: description for name, (description, _) in checks.items()}
    for table, checks in _CHECKS.items()
}


def table_problems(table: str, frame: pl.DataFrame) -> dict[str, list[str]]:
    """Check name -> the problems found in `frame` (empty: passed) for one analysis table."""
    return {name: check(frame) for name, (_, check) in _CHECKS.get(table, {}).items()}

"""Item-response speed: the Rasch fit of 40 model keys × 2,380 questions, and the whole analysis step.

1. The fit alone (`item_response.fit_rasch`) on simulated answers of 40 keys to the 29 editions' 2,380
   questions (3 × 100 + 26 × 80), then everything built on it: leave-one-out difficulties and the
   training-cutoff effect of every key, the pooled effect, the key audit.
2. The user's path: the `leaderboard` step (every analysis table, its checks, the writes) run through
   Dagster on a warehouse of 40 keys × 30 editions × 80 questions (2,400 questions, 96,000 scored
   answers, synthetic: `oabench_pipeline_tests/core/synthetic_results.py`; 3 keys in 4 without a cutoff).

Each figure is printed with its ratio to the 10 s target (issue 22), best of `--repeat`.

Run: .venv/bin/python benchmarks/irt_fit.py [--keys 40] [--repeat 3] [--skip-step]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from oabench_pipeline.core.analysis.cutoff_effect import cutoff_effect, key_cutoff_data
from oabench_pipeline.core.analysis.item_response import fit_rasch
from oabench_pipeline.core.analysis.key_audit import audit_keys
from oabench_pipeline_tests.core.irt_simulation import simulate
from oabench_pipeline_tests.core.synthetic_results import make_synthetic_warehouse, register

TARGET_S = 10.0
OAB_EDITION_SIZES = [100, 100, 100] + [80] * 26  # 2,380 questions


def time_fit(n_keys: int) -> tuple[float, float, int]:
    """(fit s, fit + cutoff effects + audit s, iterations) on one simulated benchmark."""
    sim = simulate(0, n_keys=n_keys, n_editions=len(OAB_EDITION_SIZES), per_edition=OAB_EDITION_SIZES)
    start = time.perf_counter()
    fit = fit_rasch(sim.correct, sim.covered, sim.group)
    fitted = time.perf_counter()
    datas = [key_cutoff_data(fit, k, sim.correct, sim.covered, sim.after(k)) for k in range(n_keys)]
    for k, data in enumerate(datas):
        cutoff_effect([data], [fit.ability[k]])
    cutoff_effect(datas, fit.ability)
    audit_keys(sim.letters, sim.key_letter, np.ones(sim.group.size, bool), fit.ability)
    done = time.perf_counter()
    assert fit.converged
    return fitted - start, done - start, fit.iterations


def synthetic_warehouse(root: Path, n_keys: int) -> Path:
    """The synthetic tables written as warehouse tables (scores computed the pipeline's way)."""
    from oabench_pipeline.core.scoring import score_inferences
    from oabench_pipeline.warehouse import Warehouse

    generated = make_synthetic_warehouse(n_models=n_keys, n_editions=30, seed=0, first_edition=1)
    db_path = root / "oabench.duckdb"
    store = Warehouse(db_path)
    for name, table in generated.tables.items():
        store.write_partition(name, pl.from_arrow(table))  # type: ignore[arg-type]
    con = register(duckdb.connect(), generated)
    store.write_partition("scores", score_inferences(con))
    con.close()
    store.ensure_views()
    return db_path


def time_step(db_path: Path) -> float:
    """Wall time of one in-process Dagster run of the `leaderboard` step (every table selected)."""
    from oabench_pipeline.core.tables import ANALYSIS_TABLES
    from oabench_pipeline.definitions import build_definitions
    from oabench_pipeline.engine.runs import instance_for, run_assets
    from oabench_pipeline.settings import Settings

    os.environ["OABENCH_WAREHOUSE"] = str(db_path)
    settings = Settings.from_env()
    with instance_for(settings) as instance:
        defs = build_definitions(settings)
        start = time.perf_counter()
        outcome = run_assets(defs, instance, list(ANALYSIS_TABLES))
        elapsed = time.perf_counter() - start
    if not outcome.success:
        raise SystemExit(f"the leaderboard step failed: {outcome.errors}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-step", action="store_true", help="only the fit, not the Dagster step")
    args = parser.parse_args()
    fits, totals = [], []
    for attempt in range(1, args.repeat + 1):
        fit_s, total_s, iterations = time_fit(args.keys)
        fits.append(fit_s)
        totals.append(total_s)
        print(
            f"run {attempt}: fit {fit_s:.2f} s ({iterations} Newton iterations), with every key's cutoff "
            f"effect, the pooled effect and the key audit {total_s:.2f} s"
        )
    print(
        f"fit of {args.keys} keys × 2,380 questions: best {min(fits):.2f} s = {min(fits) / TARGET_S:.2f} "
        f"of the {TARGET_S:.0f} s target; with everything built on it {min(totals):.2f} s = "
        f"{min(totals) / TARGET_S:.2f}"
    )
    if args.skip_step:
        return
    with tempfile.TemporaryDirectory(prefix="oabench-irt-") as tmp:
        db_path = synthetic_warehouse(Path(tmp), args.keys)
        steps = []
        for attempt in range(1, args.repeat + 1):
            steps.append(time_step(db_path))
            print(
                f"run {attempt}: the leaderboard step (every analysis table, checks, writes) {steps[-1]:.2f} s"
            )
        print(
            f"the leaderboard step on {args.keys} keys × 2,400 questions: best {min(steps):.2f} s = "
            f"{min(steps) / TARGET_S:.2f} of the {TARGET_S:.0f} s target"
        )


if __name__ == "__main__":
    main()

"""Scale benchmark: scoring + every leaderboard table over 1,000,000 inference rows.

500 model keys x 25 editions x 80 questions of synthetic data are written as Parquet files in a
temporary directory and exposed as DuckDB views on a fresh connection (as the pipeline does),
then `score_inferences` + `build_leaderboard_tables` are timed against a 5 s budget, plus the data versions
the assets report (`frame_version` of every table, and of all scores rows at once: a cell's are far fewer).
The tables rank three suites, as the registry's do: the default over the last three editions (the
study's shape), one over the rest (the 2010s' shape) and `all`; `--suites 1` ranks `all` alone.

Run: .venv/bin/python benchmarks/leaderboard_scale.py [--keys 500] [--editions 25] [--repeat 3] [--suites 3|1]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import duckdb

from oabench_pipeline.core.editions import ALL_SUITE, DEFAULT_SUITE, Suite
from oabench_pipeline.core.leaderboard import build_leaderboard_tables
from oabench_pipeline.core.scoring import score_inferences
from oabench_pipeline.core.versions import frame_version
from oabench_pipeline_tests.core.synthetic_results import make_synthetic_warehouse, write_parquet_views

BUDGET_S = 5.0


def suites_over(editions: list[int], count: int) -> list[Suite] | None:
    """The default suite (the last three editions), the others, and `all`; `count` 1: `all` alone."""
    if count == 1:
        return None
    return [
        Suite(name=DEFAULT_SUITE, editions=tuple(editions[-3:])),
        Suite(name="the-rest", editions=tuple(editions[:-3])),
        Suite(name=ALL_SUITE, editions=tuple(editions)),
    ]


def run_once(directory: Path, suites: list[Suite] | None) -> tuple[float, float, float, float, float, int]:
    """Score and build all tables on a fresh connection; returns (scoring s, tables s, the tables' CPU s,
    the tables' data versions s, all scores rows' data version s, rows). CPU time (every thread of the
    process) says what the work costs when other processes share the cores, as wall time cannot."""
    con = duckdb.connect()
    try:
        for name in ("questions", "answer_keys", "editions", "inferences", "models", "model_pricing"):
            literal = str(directory / f"{name}.parquet").replace("'", "''")
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{literal}')")
        start = time.perf_counter()
        scores = score_inferences(con)
        con.register("scores", scores)
        scored, cpu = time.perf_counter(), time.process_time()
        tables = build_leaderboard_tables(con, suites=suites)
        done, cpu = time.perf_counter(), time.process_time() - cpu
        assert tables["leaderboard"].height > 0
        for frame in tables.values():
            frame_version(frame)
        tables_versioned = time.perf_counter()
        frame_version(scores)
        scores_versioned = time.perf_counter()
        return (
            scored - start,
            done - scored,
            cpu,
            tables_versioned - done,
            scores_versioned - tables_versioned,
            scores.height,
        )
    finally:
        con.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=500)
    parser.add_argument("--editions", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--suites", type=int, default=3, choices=(1, 3))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="oabench-bench-") as tmp:
        directory = Path(tmp)
        started = time.perf_counter()
        warehouse = make_synthetic_warehouse(n_models=args.keys, n_editions=args.editions, seed=0)
        write_parquet_views(warehouse, directory, duckdb.connect())
        print(
            f"generated {warehouse.tables['inferences'].num_rows:,} inference rows "
            f"({args.keys} keys x {args.editions} editions x 80 questions) "
            f"in {time.perf_counter() - started:.1f} s"
        )
        suites = suites_over(warehouse.editions, args.suites)
        print(f"suites: {', '.join(s.label for s in suites) if suites else 'all (every edition) alone'}")
        best = float("inf")
        for attempt in range(1, args.repeat + 1):
            scoring_s, tables_s, tables_cpu_s, versions_s, scores_version_s, rows = run_once(
                directory, suites
            )
            total = scoring_s + tables_s
            best = min(best, total)
            print(
                f"run {attempt}: scoring {scoring_s:.2f} s ({rows:,} rows) + tables {tables_s:.2f} s "
                f"(CPU {tables_cpu_s:.2f} s) "
                f"= {total:.2f} s ({total / BUDGET_S:.0%} of the {BUDGET_S:.0f} s budget); "
                f"data versions: the tables' {versions_s:.2f} s, all scores rows at once {scores_version_s:.2f} s"
            )
        verdict = "within" if best <= BUDGET_S else "OVER"
        print(f"best {best:.2f} s: {best / BUDGET_S:.2f}x the budget, {verdict} budget")


if __name__ == "__main__":
    main()

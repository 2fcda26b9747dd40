"""Seeded synthetic warehouse tables (questions, answer keys, editions, inferences, models, pricing).

Shapes and column types follow the warehouse views the pipeline exposes, so that the scoring and
leaderboard code can be tested (and benchmarked at 1,000,000 inference rows) without real runs.
Everything is generated with vectorised numpy: the benchmark build must not dominate its timing.

What is planted, so tests can look for it:
- a few annulled questions per edition (skipped rows, no call);
- ~2% unparseable answers, ~3% answers only the lenient parser finds;
- `errored_key`: a key whose run kept ~1% unretried error rows (its run is not complete: no rank);
- `incomplete_key`: a key missing rows for part of the last edition (it must get no rank);
- `planted_qid`: a question whose published key differs from the letter the models were
  generated against (strong models agree on another letter: a possible key problem);
- `unregistered_key`: a key with no row in `models` (provider must come from the model id);
- `weird_key`: a key with quotes, a semicolon and unicode (parameterised SQL must cope);
- keys without reported cost, a model without any pricing snapshot, two snapshots for others.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from oabench_pipeline.core.editions import Suite
    from oabench_pipeline.warehouse import Warehouse  # imported where used: this module stays light

LETTERS = np.array(["A", "B", "C", "D"])

# (first question, last question, area) for the 20 areas of every OAB 1st-phase booklet.
AREA_RANGES: tuple[tuple[int, int, str], ...] = (
    (1, 8, "Ética Profissional"),
    (9, 10, "Filosofia do Direito"),
    (11, 16, "Direito Constitucional"),
    (17, 18, "Direitos Humanos"),
    (19, 20, "Direito Eleitoral"),
    (21, 22, "Direito Internacional"),
    (23, 24, "Direito Financeiro"),
    (25, 29, "Direito Tributário"),
    (30, 34, "Direito Administrativo"),
    (35, 36, "Direito Ambiental"),
    (37, 42, "Direito Civil"),
    (43, 44, "ECA (Criança e Adolescente)"),
    (45, 46, "Direito do Consumidor"),
    (47, 50, "Direito Empresarial"),
    (51, 56, "Processo Civil"),
    (57, 62, "Direito Penal"),
    (63, 68, "Processo Penal"),
    (69, 70, "Direito Previdenciário"),
    (71, 75, "Direito do Trabalho"),
    (76, 80, "Processo do Trabalho"),
)
WEIRD_KEY = "acme/o'brien\"; DROP TABLE x;--ção ✓"


def area_of(numbers: np.ndarray) -> np.ndarray:
    """Area name for every question number (1..80), by the fixed OAB ranges."""
    starts = np.array([r[0] for r in AREA_RANGES])
    names = np.array([r[2] for r in AREA_RANGES], dtype=object)
    return names[np.searchsorted(starts, numbers, side="right") - 1]


@dataclass(frozen=True)
class SyntheticWarehouse:
    """The generated tables plus the names of what was planted in them."""

    tables: dict[str, pa.Table]
    model_keys: list[str]
    incomplete_key: str | None
    unregistered_key: str | None
    weird_key: str | None
    planted_qid: str | None
    editions: list[int] = field(default_factory=list)
    errored_key: str | None = None


def _strings(indices: np.ndarray, values: list[str] | np.ndarray) -> pa.Array:
    """A string column from integer codes into a small vocabulary (fast for a million rows)."""
    dictionary = pa.array(list(values), type=pa.string())
    return pa.DictionaryArray.from_arrays(pa.array(indices.astype(np.int32)), dictionary).cast(pa.string())


def _letters(codes: np.ndarray) -> pa.Array:
    """Letters A-D from codes 0-3, NULL for code 4 (nothing extracted)."""
    indices = pa.array(np.minimum(codes, 3).astype(np.int32), mask=codes == 4)
    return pa.DictionaryArray.from_arrays(indices, pa.array(LETTERS.tolist())).cast(pa.string())


def _question_tables(
    rng: np.random.Generator, editions: np.ndarray, per_edition: int
) -> tuple[pa.Table, pa.Table, pa.Table, np.ndarray, np.ndarray]:
    """questions, answer_keys, editions tables; plus each question's true letter and annulled flag."""
    n_ed = editions.size
    edition = np.repeat(editions, per_edition)
    number = np.tile(np.arange(1, per_edition + 1), n_ed)
    qid = np.char.add(np.char.add(np.char.add("oab-", edition.astype(str)), "-1f-q"), number.astype(str))
    n_q = edition.size
    true_letter = rng.integers(0, 4, n_q)
    # About 2 annulled questions in 3 editions, like the real 43rd-45th exams.
    annulled = rng.random(n_q) < 0.01
    annulled[number == 1] |= np.arange(n_ed) == 0  # always at least one, in the first edition
    status = np.where(annulled, "annulled", "active")
    correct = np.where(annulled, None, LETTERS[true_letter])
    areas = area_of(((number - 1) % 80) + 1)
    questions = pa.table(
        {
            "qid": pa.array(qid.tolist()),
            "edition": pa.array(edition, pa.int32()),
            "number": pa.array(number, pa.int32()),
            "area": pa.array(areas.tolist()),
            "stem": pa.array([f"Enunciado {q}" for q in qid.tolist()]),
            "choice_a": pa.array(["a"] * n_q),
            "choice_b": pa.array(["b"] * n_q),
            "choice_c": pa.array(["c"] * n_q),
            "choice_d": pa.array(["d"] * n_q),
            "status": pa.array(status.tolist()),
            "requires_image": pa.array(np.zeros(n_q, dtype=bool)),
            "pages": pa.array([[1]] * n_q, pa.list_(pa.int32())),
            "source_sha256": pa.array(["0" * 64] * n_q),
        }
    )
    answer_keys = pa.table(
        {
            "qid": questions["qid"],
            "edition": questions["edition"],
            "number": questions["number"],
            "correct": pa.array(correct.tolist(), pa.string()),
            "status": questions["status"],
        }
    )
    # Exams every four months from 2020, so knowledge cutoffs split them into before/after.
    dates = [dt.date(2020 + (4 * i) // 12, 1 + (4 * i) % 12, 15) for i in range(n_ed)]
    editions_table = pa.table(
        {
            "edition": pa.array(editions, pa.int32()),
            "exam_name": pa.array([f"{e}º Exame de Ordem Unificado" for e in editions.tolist()]),
            "exam_date": pa.array(dates, pa.date32()),
        }
    )
    return questions, answer_keys, editions_table, true_letter, annulled


def make_synthetic_warehouse(
    n_models: int = 6,
    n_editions: int = 3,
    seed: int = 0,
    *,
    questions_per_edition: int = 80,
    first_edition: int = 40,
    plant_anomalies: bool = True,
) -> SyntheticWarehouse:
    """Generate all input tables for `n_models` keys x `n_editions` editions x 80 questions.

    `plant_anomalies=False` gives a clean complete set (every key answers every question).
    """
    rng = np.random.Generator(np.random.PCG64(seed))
    editions = np.arange(first_edition, first_edition + n_editions)
    questions, answer_keys, editions_table, true_letter, annulled = _question_tables(
        rng, editions, questions_per_edition
    )
    n_q = questions.num_rows
    qids = np.array(questions["qid"].to_pylist(), dtype=object)

    keys = [f"prov{i % 7}/model-{i:03d}" for i in range(n_models)]
    weird_key = None
    if plant_anomalies and n_models >= 3:
        weird_key = WEIRD_KEY
        keys[1] = weird_key
    skill = np.sort(rng.uniform(0.35, 0.92, n_models))[::-1]  # key 0 strongest
    difficulty = rng.normal(0.0, 1.0, n_q)

    # Dense key x question grid, then drop rows to make the incomplete key.
    ki = np.repeat(np.arange(n_models), n_q)
    qi = np.tile(np.arange(n_q), n_models)
    logit = np.log(skill / (1 - skill))[ki] - difficulty[qi]
    right = rng.random(ki.size) < 1.0 / (1.0 + np.exp(-logit))
    wrong_letter = (true_letter[qi] + rng.integers(1, 4, ki.size)) % 4
    letter = np.where(right, true_letter[qi], wrong_letter)
    skipped = annulled[qi]
    u = rng.random(ki.size)
    errored = n_models - 2 if plant_anomalies and n_models >= 4 else -1
    error = ~skipped & (u < 0.01) & (ki == errored)
    unparseable = ~skipped & ~error & (u < 0.02) if plant_anomalies else error
    lenient_only = ~skipped & ~error & ~unparseable & (rng.random(ki.size) < 0.03)
    has_lenient = ~skipped & ~error & ~unparseable
    has_strict = has_lenient & ~lenient_only

    keep = np.ones(ki.size, bool)
    incomplete_key = None
    if plant_anomalies and n_models >= 2:
        incomplete_key = keys[-1]
        last_edition = questions["edition"].to_numpy()[qi] == editions[-1]
        keep &= ~((ki == n_models - 1) & last_edition & (rng.random(ki.size) < 0.2) & ~skipped)
    ki, qi, letter, skipped, error, has_lenient, has_strict = (
        a[keep] for a in (ki, qi, letter, skipped, error, has_lenient, has_strict)
    )
    n = ki.size
    lenient_code = np.where(has_lenient, letter, 4)
    strict_code = np.where(has_strict, letter, 4)
    vocab = [*LETTERS.tolist(), ""]
    raw_code = np.where(has_lenient, letter, 4)

    latency = np.where(skipped, 0, rng.gamma(2.0, 600.0 + 400.0 * np.arange(n_models)[ki])).astype(np.int64)
    prompt = np.where(skipped, 0, rng.integers(250, 650, n)).astype(np.int64)
    completion = np.where(skipped, 0, 1 + (ki % 3 == 0) * rng.integers(50, 400, n)).astype(np.int64)
    reasoning = np.where(ki % 3 == 0, completion - 1, 0)
    reports_cost = ki % 2 == 0
    cost = np.where(skipped, 0.0, (prompt * 2e-7 + completion * 8e-7) * (1 + (ki % 5)))

    def masked(values: np.ndarray, mask: np.ndarray, typ: pa.DataType) -> pa.Array:
        return pa.array(values, typ, mask=mask)

    model_ids = [k if "/" in k else f"x/{k}" for k in keys]
    inferences = pa.table(
        {
            "model_key": _strings(ki, keys),
            "model": _strings(ki, model_ids),
            "protocol": _strings(np.zeros(n, int), ["direto"]),
            "reasoning_effort": pa.nulls(n, pa.string()),
            "web_search": pa.array(np.zeros(n, bool)),
            "qid": _strings(qi, qids.tolist()),
            "edition": questions["edition"].take(pa.array(qi)),
            "number": questions["number"].take(pa.array(qi)),
            "raw_response": _strings(raw_code, vocab),
            "reasoning": pa.nulls(n, pa.string()),
            "answer_strict": _letters(strict_code),
            "answer_lenient": _letters(lenient_code),
            "parser_version": _strings(np.zeros(n, int), ["1"]),
            "latency_ms": masked(latency, skipped, pa.int64()),
            "prompt_tokens": masked(prompt, skipped, pa.int64()),
            "completion_tokens": masked(completion, skipped, pa.int64()),
            "reasoning_tokens": masked(reasoning, skipped, pa.int64()),
            "cost_usd": masked(cost, skipped | ~reports_cost, pa.float64()),
            "error": pa.array(np.where(error, "HTTP 500: upstream error", None).tolist(), pa.string()),
            "skipped": pa.array(skipped),
            "attempts": pa.array(np.where(skipped, 0, 1 + error.astype(int) * 2), pa.int32()),
            "request_hash": pa.nulls(n, pa.string()),
            "source": _strings(np.zeros(n, int), ["live"]),
            "created_at": pa.array(np.full(n, np.datetime64("2026-03-03T12:00:00", "us"))),
            "run_id": _strings(np.zeros(n, int), ["synthetic-run"]),
        }
    )

    planted_qid = None
    if plant_anomalies:
        # Publish a different letter for one active question of the last edition: the models were
        # generated against the true letter, so strong models agree on a letter other than the key.
        candidates = np.flatnonzero(~annulled & (questions["edition"].to_numpy() == editions[-1]))
        pick = candidates[np.argmin(difficulty[candidates])]  # the easiest: nearly everyone agrees
        planted_qid = str(qids[pick])
        correct = answer_keys["correct"].to_pylist()
        correct[pick] = str(LETTERS[(true_letter[pick] + 1) % 4])
        answer_keys = answer_keys.set_column(3, "correct", pa.array(correct, pa.string()))

    unregistered_key = keys[2] if plant_anomalies and n_models >= 3 else None
    registered = [i for i, k in enumerate(keys) if k != unregistered_key]
    cutoffs = [dt.date(2020, 1, 1) + dt.timedelta(days=200 * (i % 4)) if i % 4 else None for i in registered]
    models = pa.table(
        {
            "model_key": pa.array([keys[i] for i in registered]),
            "model": pa.array([model_ids[i] for i in registered]),
            "label": pa.array([f"Model {i}" for i in registered]),
            "provider": pa.array([model_ids[i].split("/")[0] for i in registered]),
            "protocol": pa.array(["direto"] * len(registered)),
            "reasoning_effort": pa.nulls(len(registered), pa.string()),
            "web_search": pa.array([False] * len(registered)),
            "base_url": pa.array(["https://openrouter.ai/api/v1"] * len(registered)),
            "kind": pa.array(["api"] * len(registered)),
            "knowledge_cutoff": pa.array(cutoffs, pa.date32()),
            "in_registry": pa.array([True] * len(registered)),
        }
    )
    # Two snapshots per model (the newer must win), none for the last model.
    priced = model_ids[:-1] if n_models > 1 else model_ids
    snap_old = np.datetime64("2026-01-01T00:00:00", "us")
    snap_new = np.datetime64("2026-03-01T00:00:00", "us")
    m = len(priced)
    base_price = np.arange(1, m + 1, dtype=float) * 1e-7
    model_pricing = pa.table(
        {
            "fetched_at": pa.array(np.concatenate([np.full(m, snap_old), np.full(m, snap_new)])),
            "base_url": pa.array(["https://openrouter.ai/api/v1"] * (2 * m)),
            "model": pa.array(priced + priced),
            "prompt_price_per_token": pa.array(np.concatenate([base_price * 10, base_price])),
            "completion_price_per_token": pa.array(np.concatenate([base_price * 40, base_price * 4])),
        }
    )
    return SyntheticWarehouse(
        tables={
            "questions": questions,
            "answer_keys": answer_keys,
            "editions": editions_table,
            "inferences": inferences,
            "models": models,
            "model_pricing": model_pricing,
        },
        model_keys=keys,
        incomplete_key=incomplete_key,
        errored_key=keys[errored] if errored >= 0 else None,
        unregistered_key=unregistered_key,
        weird_key=weird_key,
        planted_qid=planted_qid,
        editions=editions.tolist(),
    )


def register(con: duckdb.DuckDBPyConnection, warehouse: SyntheticWarehouse) -> duckdb.DuckDBPyConnection:
    """Expose every table on `con` under its warehouse name (Arrow, zero copy)."""
    for name, table in warehouse.tables.items():
        con.register(name, table)
    return con


def write_parquet_views(
    warehouse: SyntheticWarehouse, directory: Path, con: duckdb.DuckDBPyConnection
) -> dict[str, Path]:
    """Write each table as Parquet under `directory` and create a view of the same name on `con`."""
    directory.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for name, table in warehouse.tables.items():
        path = directory / f"{name}.parquet"
        pq.write_table(table, path)
        # DDL takes no bound parameters; the path is ours, quotes are escaped all the same.
        literal = str(path).replace("'", "''")
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet('{literal}')")
        paths[name] = path
    return paths


def write_scored_warehouse(tables: dict[str, pa.Table], db_path: Path) -> Warehouse:
    """A real warehouse at `db_path` from synthetic input tables, scored and with every analysis table
    built, as `oabench run` leaves one: what `oabench site` and the readers of the warehouse read."""
    import polars as pl

    from oabench_pipeline.warehouse import Warehouse, views_refreshed_once

    store = Warehouse(db_path)
    with views_refreshed_once():
        for name, table in tables.items():
            store.write_partition(name, pl.from_arrow(table))  # type: ignore[arg-type]
        rescore(store)
    return store


def rescore(store: Warehouse) -> None:
    """Score every inference again and rebuild every analysis table (after a change to `inferences`)."""
    from oabench_pipeline.core.scoring import score_inferences

    with store.reader() as con:
        store.write_partition("scores", score_inferences(con))
    rebuild_tables(store)


def rebuild_tables(store: Warehouse, suites: list[Suite] | None = None) -> None:
    """Every analysis table from the scores as they are (what the `leaderboard` step does), ranked over
    `suites` (default: `all` only; `stored_suites(store)`: the suites the warehouse was ranked over)."""
    from oabench_pipeline.core.leaderboard import build_leaderboard_tables

    with store.reader() as con:
        built = build_leaderboard_tables(con, suites=suites)
    for name, frame in built.items():
        store.write_partition(name, frame)


def stored_suites(store: Warehouse) -> list[Suite]:
    """The suites of the warehouse's `suites` table, in its order: a rebuild after a new cell ranks the
    same suites as the pipeline did (the registry's, not `all` alone)."""
    from oabench_pipeline.core.editions import Suite

    return [
        Suite(name=r["suite"], editions=tuple(sorted(r["editions"])), description=r["description"] or "")
        for r in store.read("suites").iter_rows(named=True)
    ]

"""What the site shows, read from the warehouse tables in a few vectorised queries (no Dagster, no files).

Every figure comes from a warehouse table as stored: the leaderboard tables for the ranking, the
canonical run of each cell (`leaderboard_by_edition.run_id`) for what a model answered, `item_analysis`
for each question's share correct, `key_audit` for whether its key is suspicious, `question_law_currency`
and `legal_reforms` for the reforms of its area since its exam, `leaderboard_current_law` for each suite's
ranking on the questions not flagged. Nothing is recomputed here, so the site shows what
`oabench leaderboard` and `oabench sql` show.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import duckdb
import polars as pl

from oabench_pipeline.core.law_currency import flag_counts
from oabench_pipeline.core.leaderboard import suite_view
from oabench_pipeline.core.scoring import QUESTION_STATUS_SQL
from oabench_pipeline.core.site.phase2 import Phase2SiteData, load_phase2
from oabench_pipeline.core.tables import BY_SUITE

# How much of a reply a question page shows: the full text is in the `inferences` download.
REPLY_HEAD_CHARS = 280

# The scores rows of the run each leaderboard cell counts (its canonical run).
CANONICAL_SCORES_SQL = """
SELECT s.* FROM scores AS s
SEMI JOIN leaderboard_by_edition AS b
  ON b.model_key = s.model_key AND b.edition = s.edition AND b.run_id IS NOT DISTINCT FROM s.run_id
"""

ANSWERS_SQL = f"""
WITH canonical AS ({CANONICAL_SCORES_SQL})
SELECT c.model_key, c.qid, c.edition, c.number, c.area, c.answer, c.answer_strict,
       c.is_correct_technical, c.is_correct_official, c.is_valid, c.has_error, c.skipped,
       c.latency_ms, c.reasoning_tokens, c.completion_tokens, c.run_id,
       left(i.raw_response, {REPLY_HEAD_CHARS}) AS reply_head,
       length(i.raw_response) AS reply_chars,
       i.error
FROM canonical AS c
LEFT JOIN inferences AS i
  ON i.model_key = c.model_key AND i.qid = c.qid AND i.run_id IS NOT DISTINCT FROM c.run_id
ORDER BY c.edition, c.number, c.model_key
"""

QUESTIONS_SQL = f"""
SELECT q.qid, q.edition, q.number, q.area, q.stem, q.choice_a, q.choice_b, q.choice_c, q.choice_d,
       q.requires_image, q.pages, k.correct, {QUESTION_STATUS_SQL} AS status,
       k.key_document, k.changed_after_preliminary, k.preliminary_correct, k.status_note,
       ia.n_models, ia.share_correct, ia.flag,
       coalesce(ka.suspicious, false) AS suspicious, ka.consensus, ka.consensus_weight, ka.key_status,
       {{currency_columns}}
FROM questions AS q
LEFT JOIN answer_keys AS k ON k.qid = q.qid
LEFT JOIN item_analysis AS ia ON ia.qid = q.qid
LEFT JOIN key_audit AS ka ON ka.qid = q.qid
{{currency_join}}
ORDER BY q.edition, q.number
"""
# A question's law currency (`question_law_currency`), or nothing in a warehouse built before it.
_CURRENCY_COLUMNS = (
    "lc.reforms_after, coalesce(lc.possibly_superseded, false) AS possibly_superseded, lc.note_verdict, "
    "lc.note AS currency_note, lc.note_source"
)
_NO_CURRENCY_COLUMNS = (
    "[]::VARCHAR[] AS reforms_after, false AS possibly_superseded, NULL::VARCHAR AS note_verdict, "
    "NULL::VARCHAR AS currency_note, NULL::VARCHAR AS note_source"
)

# Every run of every key, with the official score of each of its cells (a replicate's spread shows here).
RUN_SCORES_SQL = """
SELECT model_key, run_id, edition,
       count(*) FILTER (WHERE is_correct_official) AS official_score,
       count(*) FILTER (WHERE status <> 'unresolved') AS questions
FROM scores GROUP BY ALL ORDER BY model_key, run_id, edition
"""

LATENCIES_SQL = f"""
SELECT model_key, latency_ms FROM ({CANONICAL_SCORES_SQL})
WHERE NOT skipped AND latency_ms IS NOT NULL
ORDER BY model_key, latency_ms
"""


@dataclass(frozen=True)
class SuiteBoard:
    """One suite's ranking as its Início shows it: the tables as that suite sees them (`suite_view`, as
    the report and `oabench leaderboard --suite` read them; the default suite's are the plain tables)."""

    name: str | None
    """None: a warehouse without a `suites` table (its plain tables, one Início)."""
    description: str
    editions: list[int]
    is_default: bool
    leaderboard: pl.DataFrame
    by_edition: pl.DataFrame
    """The suite's editions only."""
    by_area: pl.DataFrame
    pareto: pl.DataFrame
    current_law: pl.DataFrame
    """The suite's rows of `leaderboard_current_law` (empty before that table)."""
    flag_counts: pl.DataFrame
    """How many of the suite's questions each law-currency flag leaves (`law_currency.flag_counts`)."""


@dataclass(frozen=True)
class SiteData:
    """The frames the pages are rendered from."""

    leaderboard: pl.DataFrame
    by_edition: pl.DataFrame
    by_area: pl.DataFrame
    pareto: pl.DataFrame
    runs: pl.DataFrame
    run_scores: pl.DataFrame
    run_variance: pl.DataFrame
    editions: pl.DataFrame
    source_files: pl.DataFrame
    questions: pl.DataFrame
    answers: pl.DataFrame
    latencies: pl.DataFrame
    parser_versions: list[str]
    protocols: dict[str, str]
    """Model key → the protocol its answers were asked under."""
    newest_answer: dt.datetime | None
    oldest_answer: dt.datetime | None
    suites: list[SuiteBoard]
    """Every suite of the `suites` table, in its order (at least one board)."""
    legal_reforms: pl.DataFrame
    """The `legal_reforms` table (empty before it)."""
    phase2: Phase2SiteData
    """The 2nd phase's tables and the candidates' pass rates (each empty before it)."""

    @property
    def model_keys(self) -> list[str]:
        """Every key some suite ranks or lists (a key that ran only editions outside the default suite
        too): each gets a page."""
        keys = dict.fromkeys(self.leaderboard["model_key"].to_list())
        for board in self.suites:
            keys.update(dict.fromkeys(board.leaderboard["model_key"].to_list()))
        return list(keys)

    def board(self, suite: str | None) -> SuiteBoard:
        """The named suite's board (None: the default one)."""
        for board in self.suites:
            if board.name == suite or (suite is None and board.is_default):
                return board
        raise ValueError(
            f"suite {suite!r} is not in the suites table (there: "
            + ", ".join(str(b.name) for b in self.suites)
            + ")"
        )


def _frame(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    return con.sql(sql).pl()


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {row[0] for row in con.sql("SELECT table_name FROM information_schema.tables").fetchall()}


def _suite_boards(con: duckdb.DuckDBPyConnection, plain: dict[str, pl.DataFrame]) -> list[SuiteBoard]:
    """Each suite's board from the `_by_suite` twins; without a `suites` table, one board of the plain tables."""
    present = _tables(con)
    currency = (
        _frame(con, "SELECT * FROM question_law_currency")
        if {"question_law_currency", "legal_reforms", "leaderboard_current_law"} <= present
        else None
    )
    if "suites" not in present or _frame(con, "SELECT count(*) AS n FROM suites")["n"][0] == 0:
        editions = sorted(set(plain["leaderboard_by_edition"]["edition"].to_list()))
        return [
            SuiteBoard(
                None,
                "",
                editions,
                True,
                plain["leaderboard"],
                plain["leaderboard_by_edition"],
                plain["leaderboard_by_area"],
                plain["pareto_frontier"],
                pl.DataFrame(),
                pl.DataFrame(),
            )
        ]
    reforms = (
        _frame(con, "SELECT * FROM legal_reforms ORDER BY in_force, reform") if currency is not None else None
    )
    current_law = _frame(con, "SELECT * FROM leaderboard_current_law") if currency is not None else None
    twins = {name: _frame(con, f'SELECT * FROM "{name}"') for name in BY_SUITE if name in present}
    boards = []
    for row in _frame(con, "SELECT * FROM suites").iter_rows(named=True):
        view = suite_view({**plain, **twins}, row["suite"], row["editions"], plain=bool(row["is_default"]))
        boards.append(
            SuiteBoard(
                row["suite"],
                row["description"] or "",
                sorted(row["editions"]),
                bool(row["is_default"]),
                # In the order `oabench leaderboard` prints it (the stored order of the plain table).
                view["leaderboard"].sort(
                    ["rank", "official_score", "model_key"],
                    descending=[False, True, False],
                    nulls_last=True,
                    maintain_order=True,
                ),
                view["leaderboard_by_edition"],
                view["leaderboard_by_area"].sort("model_key", "area_order", "area"),
                view["pareto_frontier"],
                current_law.filter(pl.col("suite") == row["suite"])
                if current_law is not None
                else pl.DataFrame(),
                flag_counts(currency, reforms, row["editions_ingested"])
                if currency is not None and reforms is not None
                else pl.DataFrame(),
            )
        )
    return boards


def load_site_data(con: duckdb.DuckDBPyConnection) -> SiteData:
    """Read everything the pages show from `con` (the warehouse reader: every table as a view)."""
    span = con.sql("SELECT min(created_at), max(created_at) FROM inferences").fetchall()[0]
    parsers = con.sql(
        "SELECT DISTINCT parser_version FROM inferences WHERE parser_version IS NOT NULL ORDER BY 1"
    ).fetchall()
    plain = {
        "leaderboard": _frame(con, "SELECT * FROM leaderboard"),
        "leaderboard_by_edition": _frame(
            con, "SELECT * FROM leaderboard_by_edition ORDER BY model_key, edition"
        ),
        # Every edition's areas (the model pages); ties of area_order broken by name, so a rebuild is stable.
        "leaderboard_by_area": _frame(
            con, "SELECT * FROM leaderboard_by_area ORDER BY model_key, area_order, area"
        ),
        "pareto_frontier": _frame(con, "SELECT * FROM pareto_frontier"),
    }
    return SiteData(
        leaderboard=plain["leaderboard"],
        by_edition=plain["leaderboard_by_edition"],
        by_area=plain["leaderboard_by_area"],
        pareto=plain["pareto_frontier"],
        runs=_frame(con, "SELECT * FROM runs ORDER BY model_key, started_at, run_id"),
        run_scores=_frame(con, RUN_SCORES_SQL),
        run_variance=_frame(con, "SELECT * FROM run_variance"),
        editions=_frame(con, "SELECT * FROM editions ORDER BY edition"),
        source_files=_frame(con, "SELECT * FROM source_files ORDER BY edition, kind"),
        questions=_frame(con, _questions_sql(_tables(con))),
        answers=_frame(con, ANSWERS_SQL),
        latencies=_frame(con, LATENCIES_SQL),
        parser_versions=[row[0] for row in parsers],
        protocols=dict(
            con.sql("SELECT model_key, min(protocol) FROM inferences GROUP BY model_key").fetchall()
        ),
        oldest_answer=span[0],
        newest_answer=span[1],
        suites=_suite_boards(con, plain),
        legal_reforms=_frame(con, "SELECT * FROM legal_reforms ORDER BY in_force, reform")
        if "legal_reforms" in _tables(con)
        else pl.DataFrame(),
        phase2=load_phase2(con, _tables(con)),
    )


def _questions_sql(present: set[str]) -> str:
    if "question_law_currency" in present:
        columns, join = _CURRENCY_COLUMNS, "LEFT JOIN question_law_currency AS lc ON lc.qid = q.qid"
    else:
        columns, join = _NO_CURRENCY_COLUMNS, ""
    return QUESTIONS_SQL.replace("{currency_columns}", columns).replace("{currency_join}", join)

"""Build the static site: every page from the warehouse tables, written only where its bytes changed.

Pages (paths in `paths.py`): Início, one Modelo per model key of the leaderboard, one Edição per edition,
one Questão per question, Metodologia and Dados (every warehouse table as CSV and Parquet, and the SQL
that recomputes each figure). Charts are SVG files. Nothing in a page depends on when it was built (only
on the data: the newest answer's time heads each page), so an unchanged warehouse rebuilds to the same
bytes and nothing is rewritten.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import polars as pl

from oabench_pipeline.core import charts
from oabench_pipeline.core.answer_parsing import PARSER_VERSIONS
from oabench_pipeline.core.editions import format_editions
from oabench_pipeline.core.prompts import SYSTEM_PROMPTS, TEMPERATURE, TOP_P, user_prompt
from oabench_pipeline.core.rendering import render, template_bytes
from oabench_pipeline.core.reports import editions_covered, frame_bytes, passed_text
from oabench_pipeline.core.scoring import SCORING_VERSION
from oabench_pipeline.core.site import paths
from oabench_pipeline.core.site.data import SiteData, SuiteBoard, load_site_data
from oabench_pipeline.core.site.labels import SUITE_DESCRIPTIONS_PT, Lang, Words, moment
from oabench_pipeline.core.site.phase2 import phase2_pages
from oabench_pipeline.core.site.recompute import RECIPES
from oabench_pipeline.core.site.writer import SiteWriter, folder_lock
from oabench_pipeline.core.versions import (
    ANALYSIS_VERSION,
    ANSWER_KEY_PARSER_VERSION,
    BOOKLET_PARSER_VERSION,
    REPORT_VERSION,
    SITE_VERSION,
    frame_version,
)

# Columns left out of the downloads: paths on the machine that built the site, of no use to a reader.
LOCAL_COLUMNS: dict[str, tuple[str, ...]] = {"source_files": ("fetched_from", "stored_at")}


@dataclass(frozen=True)
class SiteOptions:
    lang: Lang = "pt"
    suite: str | None = None
    """The suite ranked on `index.html` (None: the default one, the study's); every other suite's
    ranking is `suite/<suite>.html`, each linked from the switcher on every Início."""


@dataclass(frozen=True)
class SiteResult:
    """What a build did: the folder, how many files it holds, which it wrote or removed, its size."""

    folder: Path
    files: int
    pages: int
    written: list[str]
    removed: list[str]
    total_bytes: int

    @property
    def unchanged(self) -> int:
        return self.files - len(self.written)


def build_site(
    con: duckdb.DuckDBPyConnection,
    out_dir: Path,
    tables: list[str],
    options: SiteOptions = SiteOptions(),
    waiting: Callable[[str], None] | None = None,
) -> SiteResult:
    """Write the site for the warehouse behind `con` into `out_dir`; `tables`: the tables offered as downloads.

    Another build writing `out_dir` is waited for (`waiting` is told): builds of one folder take turns.
    """
    data = load_site_data(con)
    data.board(options.suite)  # an unknown suite fails before anything is written
    with folder_lock(Path(out_dir), waiting):
        return _write_site(con, data, Path(out_dir), tables, options)


def _write_site(
    con: duckdb.DuckDBPyConnection, data: SiteData, out_dir: Path, tables: list[str], options: SiteOptions
) -> SiteResult:
    writer = SiteWriter(out_dir)
    downloads = []
    for table in tables:
        frame = con.sql(f'SELECT * FROM "{table}"').pl().drop(LOCAL_COLUMNS.get(table, ()), strict=False)
        writer.put(paths.data_file(table, "csv"), frame_bytes(frame, "csv"))
        writer.put(paths.data_file(table, "parquet"), frame_bytes(frame, "parquet"))
        downloads.append({"table": table, "rows": frame.height})
    ctx = _Context(data, options)
    pages = 0
    for relative, content in _pages(data, ctx, downloads):
        writer.put(relative, content)
        pages += 1
    for chart_path, chart_digest, draw in _charts(data, ctx):
        writer.put_made(chart_path, chart_digest, draw)
    writer.put(paths.STYLESHEET, template_bytes("site/site.css"))
    removed = writer.finish()
    return SiteResult(Path(out_dir), writer.files, pages, writer.written, removed, writer.total_bytes)


class _Context:
    """What every page shares: the language, the data's time, the links between pages."""

    def __init__(self, data: SiteData, options: SiteOptions) -> None:
        self.words = Words(options.lang)
        self.lang = options.lang
        self.data_as_of = moment(data.newest_answer)
        self.slugs = paths.model_slugs(data.model_keys)
        self.labels = dict(zip(data.leaderboard["model_key"], data.leaderboard["label"], strict=True))
        for board in data.suites:  # a key outside the index suite: its label from a suite that lists it
            for key, label in board.leaderboard.select("model_key", "label").iter_rows():
                self.labels.setdefault(key, label)
        self.edition_names = dict(zip(data.editions["edition"], data.editions["exam_name"], strict=True))
        self.home = data.board(options.suite)
        self.has_phase2 = data.phase2.has_pages  # no phase-2 items: no pages, and no link to them
        # Where each suite's Início is: the chosen suite's is index.html, every other one suite/<name>.html.
        self.suite_pages = {
            board.name: paths.INDEX if board is self.home else paths.suite_page(str(board.name))
            for board in data.suites
        }

    def page(self, template: str, at: str, **context: Any) -> tuple[str, str]:
        root = paths.relative(at, "")
        html = render(
            template,
            lang=self.lang,
            t=self.words.t,
            f=self.words,
            root=root,
            data_as_of=self.data_as_of,
            phase2_href=root + paths.PHASE2_INDEX if self.has_phase2 else None,
            **context,
        )
        return at, html

    def model_href(self, at: str, model_key: str) -> str | None:
        """The link to a key's page (None for a key no suite lists: it has no page)."""
        if model_key not in self.slugs:
            return None
        return paths.relative(at, paths.model_page(self.slugs[model_key]))

    def chart(self, board: SuiteBoard, name: str) -> str:
        """A suite's chart: the index suite's at `graficos/<name>.svg`, another's under its own folder."""
        if board is self.home:
            return paths.chart(name)
        return paths.chart(f"suite/{paths.slug(str(board.name))}/{name}")

    def key_status(self, edition_row: dict) -> str:
        # The editions table's answer key is the definitive one unless a `key_status` column says otherwise.
        return self.words.t(str(edition_row.get("key_status") or "definitive"))


def _pages(data: SiteData, ctx: _Context, downloads: list[dict]) -> Iterator[tuple[str, str]]:
    for board in data.suites:
        yield _index(data, ctx, board)
    for key in data.model_keys:
        board, row = _model_board(data, ctx, key)
        yield _model(data, ctx, row, editions_covered(board.by_edition), board)
    for row in data.editions.iter_rows(named=True):
        yield _edition(data, ctx, row)
    yield from _questions(data, ctx)
    yield from phase2_pages(data.phase2, ctx.page, ctx.labels, ctx.model_href, data.by_edition)
    yield _methodology(data, ctx)
    yield _data_page(ctx, downloads)


def _model_board(data: SiteData, ctx: _Context, key: str) -> tuple[SuiteBoard, dict]:
    """The suite a model page summarises and the key's row in it: the index suite's, else (a key that ran
    no edition of it) the suite with the most editions that lists the key."""
    boards = [ctx.home, *sorted(data.suites, key=lambda b: -len(b.editions))]
    for board in boards:
        rows = board.leaderboard.filter(pl.col("model_key") == key)
        if rows.height:
            return board, rows.row(0, named=True)
    raise ValueError(f"model key {key} is on no leaderboard")  # model_keys come from the leaderboards


def _index(data: SiteData, ctx: _Context, suite: SuiteBoard) -> tuple[str, str]:
    at = ctx.suite_pages[suite.name]
    covered = editions_covered(suite.by_edition)
    board = [
        {
            **row,
            "href": ctx.model_href(at, row["model_key"]),
            "passed_text": passed_text(row, len(covered.get(row["model_key"], [])), ctx.words.t("of")),
        }
        for row in suite.leaderboard.iter_rows(named=True)
    ]
    no_cost = suite.pareto.filter(pl.col("cost_usd").is_null() | (pl.col("cost_usd") <= 0))["label"].to_list()
    in_suite = set(suite.editions)
    editions = [e for e in _edition_rows(data, ctx, at) if e["edition"] in in_suite]
    words = ctx.words
    suite_text = f"{words.t('editions')} {format_editions(suite.editions).replace(',', ', ')}"
    if suite.name is not None:
        suite_text = f"{words.t('suite')} {suite.name}: " + suite_text
    return ctx.page(
        "site/index.html",
        at,
        board=board,
        suite_text=suite_text,
        suite_description=_suite_description(ctx, suite),
        suites=[
            {
                "label": board.name,
                "href": paths.relative(at, ctx.suite_pages[board.name]),
                "current": board is suite,
                "editions": format_editions(board.editions).replace(",", ", "),
            }
            for board in data.suites
        ],
        oldest_answer=moment(data.oldest_answer),
        any_estimated=any(r["cost_source"] == "estimated" for r in board),
        any_incomplete=any(not r["complete"] for r in board),
        # A suite none of whose editions has answers yet has no chart to draw.
        frontier_chart=paths.relative(at, ctx.chart(suite, "custo-vs-acuracia")) if board else None,
        area_chart=paths.relative(at, ctx.chart(suite, "acuracia-por-area")) if board else None,
        no_cost=no_cost,
        editions=editions,
        current_law=[
            {
                **row,
                "href": ctx.model_href(at, row["model_key"]),
                "label": ctx.labels.get(row["model_key"], row["model_key"]),
            }
            for row in suite.current_law.iter_rows(named=True)
        ],
        flag_counts=[
            (_flag_in_portuguese(flag) if ctx.lang == "pt" else flag, n)
            for flag, n in suite.flag_counts.iter_rows()
        ],
    )


# `law_currency.flag_counts`' first rows in Portuguese (the reforms keep their ids).
_FLAG_WORDS_PT = {
    "current law": "direito vigente",
    "possibly superseded": "possivelmente superadas",
    "a note says it outdated": "nota: superada",
    "a note says it holds": "nota: ainda vale",
}


def _flag_in_portuguese(flag: str) -> str:
    if flag.startswith("under "):  # "under cpc-2015 (in force 2016-03-18)"
        return flag.replace("under ", "sob ", 1).replace("(in force ", "(em vigor desde ")
    return _FLAG_WORDS_PT.get(flag, flag)


def _suite_description(ctx: _Context, suite: SuiteBoard) -> str:
    """The registry's description (English), in Portuguese for the suites the pipeline ships as shipped."""
    if ctx.lang == "pt":
        return SUITE_DESCRIPTIONS_PT.get(suite.description, suite.description)
    return suite.description


def _edition_rows(data: SiteData, ctx: _Context, at: str) -> list[dict]:
    counts = dict(data.questions.group_by("edition").len().iter_rows())
    return [
        {
            **row,
            "name": row["exam_name"],
            "href": paths.relative(at, paths.edition_page(row["edition"])),
            "questions": counts.get(row["edition"], 0),
            "key_status": ctx.key_status(row),
        }
        for row in data.editions.iter_rows(named=True)
    ]


def _model(
    data: SiteData, ctx: _Context, row: dict, covered: dict[str, list[int]], board: SuiteBoard
) -> tuple[str, str]:
    key = row["model_key"]
    at = paths.model_page(ctx.slugs[key])
    per_edition = [
        {
            **e,
            "href": paths.relative(at, paths.edition_page(e["edition"])),
            "tokens": (e["prompt_tokens"] or 0) + (e["completion_tokens"] or 0),
        }
        for e in data.by_edition.filter(pl.col("model_key") == key).iter_rows(named=True)
    ]
    missed = data.answers.filter(
        (pl.col("model_key") == key) & ~pl.col("skipped") & ~pl.col("is_correct_technical").fill_null(False)
    ).join(data.questions.select("qid", "correct", "status"), on="qid", how="left")
    missed_rows = [
        {**m, "href": paths.relative(at, paths.question_page(m["qid"]))}
        for m in missed.filter(pl.col("status") == "active").iter_rows(named=True)
    ]
    counted = set(data.by_edition.filter(pl.col("model_key") == key)["run_id"].to_list())
    scores_by_run: dict[str, list[str]] = {}
    for r in data.run_scores.filter(pl.col("model_key") == key).iter_rows(named=True):
        scores_by_run.setdefault(r["run_id"], []).append(
            f"{r['edition']}: {r['official_score']}/{r['questions']}"
        )
    runs = [
        {
            **r,
            "started": moment(r["started_at"]),
            "completed": moment(r["completed_at"]),
            "scores": " · ".join(scores_by_run.get(r["run_id"], [])),
            "counted": r["run_id"] in counted,
        }
        for r in data.runs.filter(pl.col("model_key") == key).iter_rows(named=True)
    ]
    variance = data.run_variance.filter(pl.col("model_key") == key)
    variance_row = None
    if variance.height and variance["runs"][0] >= 2:
        v = variance.row(0, named=True)
        variance_row = {
            **v,
            "sd": ctx.words.integer(None) if v["score_sd"] is None else f"{v['score_sd']:.2f}",
        }
    has_latency = data.latencies.filter(pl.col("model_key") == key).height > 0
    return ctx.page(
        "site/model.html",
        at,
        m=row,
        suite_name=board.name,
        home_href=paths.relative(at, ctx.suite_pages[board.name]),
        protocol=data.protocols.get(key, "—"),
        passed_text=passed_text(row, len(covered.get(key, [])), ctx.words.t("of")),
        per_edition=per_edition,
        per_area=_areas_in_booklet_order(data, key, [e["edition"] for e in per_edition]),
        latency_chart=paths.relative(at, paths.chart(_latency_chart(ctx.slugs[key])))
        if has_latency
        else None,
        runs=runs,
        variance=variance_row,
        missed=missed_rows,
    )


def _areas_in_booklet_order(data: SiteData, key: str, editions: list[int]) -> list[dict]:
    """The key's areas (every edition it ran) in the order its editions' booklets put them: the table's
    `area_order` is the first question number over every edition, where areas of different editions tie."""
    first = (
        data.questions.filter(pl.col("edition").is_in(editions))
        .group_by("area")
        .agg(first_number=pl.col("number").min())
    )
    return (
        data.by_area.filter(pl.col("model_key") == key)
        .join(first, on="area", how="left")
        .sort("first_number", "area_order", "area", nulls_last=True)
        .to_dicts()
    )


def _latency_chart(model_slug: str) -> str:
    return f"latencia/{model_slug}"


def _edition(data: SiteData, ctx: _Context, row: dict) -> tuple[str, str]:
    edition = row["edition"]
    at = paths.edition_page(edition)
    words = ctx.words
    files = [
        {
            "label": words.t("booklet"),
            "url": row["booklet_url"],
            "sha256": row["booklet_sha256"],
            "bytes": None,
        },
        {
            "label": words.t("answer_key"),
            "url": row["answer_key_url"],
            "sha256": row["answer_key_sha256"],
            "bytes": None,
        },
    ]
    sizes = {
        r["sha256"]: r["bytes"]
        for r in data.source_files.filter(pl.col("edition") == edition).iter_rows(named=True)
    }
    for file in files:
        file["bytes"] = sizes.get(file["sha256"])
    right = (
        data.answers.filter(pl.col("edition") == edition)
        .group_by("qid")
        .agg(n_right=pl.col("is_correct_technical").fill_null(False).sum())
    )
    questions = data.questions.filter(pl.col("edition") == edition).join(right, on="qid", how="left")
    question_rows = [
        {
            **q,
            "href": paths.relative(at, paths.question_page(q["qid"])),
            "n_right": q["n_right"] or 0,
        }
        for q in questions.iter_rows(named=True)
    ]
    results = [
        {
            **r,
            "label": ctx.labels.get(r["model_key"], r["model_key"]),
            "href": ctx.model_href(at, r["model_key"]),
        }
        for r in data.by_edition.filter(pl.col("edition") == edition)
        .sort("official_score", "model_key", descending=[True, False])
        .iter_rows(named=True)
    ]
    return ctx.page(
        "site/edition.html",
        at,
        e=row,
        key_status=ctx.key_status(row),
        files=files,
        questions=question_rows,
        annulled=sum(q["status"] == "annulled" for q in question_rows),
        unresolved=sum(q["status"] == "unresolved" for q in question_rows),
        results=results,
        pass_rate=data.phase2.pass_rate(edition),
        phase2_here=ctx.has_phase2 and edition in set(data.phase2.items["edition"].to_list()),
    )


def _questions(data: SiteData, ctx: _Context) -> Iterator[tuple[str, str]]:
    answers_by_qid = {
        qid: frame.to_dicts() for (qid,), frame in data.answers.partition_by("qid", as_dict=True).items()
    }
    statuses = {row["edition"]: ctx.key_status(row) for row in data.editions.iter_rows(named=True)}
    reforms = {row["reform"]: row for row in data.legal_reforms.iter_rows(named=True)}
    by_edition = data.questions.partition_by("edition", as_dict=True, maintain_order=True)
    for (edition,), frame in by_edition.items():
        rows = frame.to_dicts()
        for index, q in enumerate(rows):
            at = paths.question_page(q["qid"])
            answers = [
                # Attributes, not dict keys: Jinja looks an attribute up first (most of a page's time).
                SimpleNamespace(
                    **a,
                    href=ctx.model_href(at, a["model_key"]),
                    label=ctx.labels.get(a["model_key"], a["model_key"]),
                )
                for a in answers_by_qid.get(q["qid"], [])
            ]
            # By name, not by rank: a new cell elsewhere that moves the ranking leaves this page as it was.
            answers.sort(key=lambda a: (str(a.label).casefold(), a.model_key))
            neighbour = {
                name: paths.relative(at, paths.question_page(rows[j]["qid"])) if 0 <= j < len(rows) else None
                for name, j in (("previous", index - 1), ("next", index + 1))
            }
            yield ctx.page(
                "site/question.html",
                at,
                q=q,
                edition_name=ctx.edition_names.get(edition, str(edition)),
                edition_href=paths.relative(at, paths.edition_page(edition)),
                # The question's own key status where the answer keys say, else its edition's.
                key_status=ctx.words.t(q["key_status"]) if q["key_status"] else statuses.get(edition, "—"),
                n_right=sum(bool(a.is_correct_technical) for a in answers),
                choices=[(letter, q[f"choice_{letter.lower()}"]) for letter in "ABCD"],
                answers=answers,
                reforms=[reforms[r] for r in q["reforms_after"] or [] if r in reforms],
                **neighbour,
            )


def _methodology(data: SiteData, ctx: _Context) -> tuple[str, str]:
    at = paths.METHODOLOGY
    versions = [
        (ctx.words.t("lenient") + " / " + ctx.words.t("strict"), ", ".join(data.parser_versions) or "—"),
        ("parsers", ", ".join(PARSER_VERSIONS)),
        ("booklet", BOOKLET_PARSER_VERSION),
        ("answer key", ANSWER_KEY_PARSER_VERSION),
        ("scoring", SCORING_VERSION),
        ("analysis", ANALYSIS_VERSION),
        ("report", REPORT_VERSION),
        ("site", SITE_VERSION),
    ]
    example = user_prompt(1, "<enunciado>", "<A>", "<B>", "<C>", "<D>")
    return ctx.page(
        "site/methodology.html",
        at,
        prompts=[(f"{ctx.words.t('protocol')} {name}", text) for name, text in SYSTEM_PROMPTS.items()],
        user_prompt=example,
        temperature=TEMPERATURE,
        top_p=TOP_P,
        versions=versions,
        editions=_edition_rows(data, ctx, at),
    )


def _data_page(ctx: _Context, downloads: list[dict]) -> tuple[str, str]:
    at = paths.DATA
    links = [
        {
            **d,
            "csv": paths.relative(at, paths.data_file(d["table"], "csv")),
            "parquet": paths.relative(at, paths.data_file(d["table"], "parquet")),
        }
        for d in downloads
    ]
    return ctx.page(
        "site/data.html",
        at,
        downloads=links,
        queries=[{"name": r.name, "title": r.title(ctx.lang), "sql": r.sql} for r in RECIPES],
    )


def _charts(data: SiteData, ctx: _Context) -> Iterator[tuple[str, str, Callable[[], bytes]]]:
    """(path, digest of what the chart is drawn from, how to draw it): drawing is most of a build's time,
    so a chart whose inputs did not change is not drawn again (`SiteWriter.put_made`)."""
    words = charts.PORTUGUESE if ctx.lang == "pt" else charts.ChartWords()

    def digest(*parts: object) -> str:
        return hashlib.sha256(repr((charts.CHART_VERSION, words, *parts)).encode()).hexdigest()

    for suite in (s for s in data.suites if not s.leaderboard.is_empty()):  # as each Início shows them
        frontier = partial(_frontier_svg, suite.pareto, words)
        heatmap = partial(_heatmap_svg, suite.by_area, suite.leaderboard, words)
        board = suite.leaderboard.select("model_key", "label", "complete").rows()
        yield ctx.chart(suite, "custo-vs-acuracia"), digest(frame_version(suite.pareto)), frontier
        yield ctx.chart(suite, "acuracia-por-area"), digest(frame_version(suite.by_area), board), heatmap
    slugs = ctx.slugs
    for (key,), frame in data.latencies.partition_by("model_key", as_dict=True).items():
        if key in slugs:
            values = frame["latency_ms"].to_list()
            yield (
                paths.chart(_latency_chart(slugs[key])),
                digest(values),
                partial(_latency_svg, values, words),
            )


def _frontier_svg(pareto: pl.DataFrame, words: charts.ChartWords) -> bytes:
    return charts.svg_bytes(charts.cost_vs_accuracy(pareto, words)[0])


def _heatmap_svg(by_area: pl.DataFrame, board: pl.DataFrame, words: charts.ChartWords) -> bytes:
    return charts.svg_bytes(charts.area_heatmap(by_area, board, words))


def _latency_svg(values: list[float], words: charts.ChartWords) -> bytes:
    return charts.svg_bytes(charts.latency_histogram(values, words))

"""The site's 2nd-phase pages and the candidates' pass rates, read from the warehouse tables as stored.

`fase2/index.html`: each judge's leaderboard of the models (`phase2_leaderboard`: rank with its rank range,
mean area-exam score with its 95% interval, exams passed), both phases side by side per edition, the judges compared
(`phase2_judge_agreement`), and every item. `fase2/item/<item>.html`: the statement, the answer standard with
its criteria, each model's answer and each judge's correction and score. A warehouse without phase-2 items has
none of these pages, and no link to them. Replies and judgments are untrusted text: the templates escape them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import duckdb
import polars as pl

from oabench_pipeline.core.pass_rates import load_pass_rates
from oabench_pipeline.core.site.paths import PHASE2_INDEX, phase2_item_page, relative

PHASE2_TABLES = (
    "phase2_items",
    "phase2_standards",
    "phase2_answers",
    "phase2_judgments",
    "phase2_scores",
    "phase2_leaderboard",
    "phase2_judge_agreement",
)


@dataclass(frozen=True)
class Phase2SiteData:
    items: pl.DataFrame
    standards: pl.DataFrame
    answers: pl.DataFrame
    judgments: pl.DataFrame
    scores: pl.DataFrame
    leaderboard: pl.DataFrame
    agreement: pl.DataFrame
    pass_rates: pl.DataFrame
    """`candidate_pass_rates` (empty before it): shown on the 1st-phase edition pages too."""

    @property
    def has_pages(self) -> bool:
        return not self.items.is_empty()

    def pass_rate(self, edition: int) -> dict[str, Any] | None:
        if self.pass_rates.is_empty():
            return None
        rows = self.pass_rates.filter(pl.col("edition") == edition)
        return rows.row(0, named=True) if rows.height else None


def load_phase2(con: duckdb.DuckDBPyConnection, present: set[str]) -> Phase2SiteData:
    """The phase-2 tables (each one missing from the warehouse an empty frame) and the pass rates."""

    def table(name: str, order: str) -> pl.DataFrame:
        return con.sql(f'SELECT * FROM "{name}" ORDER BY {order}').pl() if name in present else pl.DataFrame()

    # The registry's rates until the `candidate_pass_rates` asset has written them, as the report does.
    pass_rates = table("candidate_pass_rates", "edition")
    return Phase2SiteData(
        items=table("phase2_items", "edition, area, coalesce(number, 0), item_id"),
        standards=table("phase2_standards", "item_id, turn"),
        answers=table("phase2_answers", "item_id, model_key, run_id, turn"),
        judgments=table("phase2_judgments", "item_id, model_key, judge_key, turn"),
        scores=table("phase2_scores", "judge_key, model_key, edition, area"),
        leaderboard=table(
            "phase2_leaderboard", "judge_key, rank NULLS LAST, mean_score DESC NULLS LAST, model_key"
        ),
        agreement=table("phase2_judge_agreement", "judge_a, judge_b, area"),
        pass_rates=pass_rates if not pass_rates.is_empty() else load_pass_rates(),
    )


# (template, page path, context) → (path, html): the build's `_Context.page`.
PageMaker = Callable[..., tuple[str, str]]


def phase2_pages(
    data: Phase2SiteData,
    page: PageMaker,
    labels: dict[str, str],
    model_href: Callable[[str, str], str | None],
    phase1_by_edition: pl.DataFrame,
) -> Iterator[tuple[str, str]]:
    """Every 2nd-phase page (none without items)."""
    if not data.has_pages:
        return
    yield _leaderboard_page(data, page, labels, model_href, phase1_by_edition)
    yield from _item_pages(data, page, labels, model_href)


def judge_boards(leaderboard: pl.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Per judge, its `phase2_leaderboard` rows as stored: ranked models by rank, then the unranked (an
    incomplete area-exam) by mean score."""
    if leaderboard.is_empty():
        return {}
    return {
        str(judge): rows.to_dicts()
        for (judge,), rows in leaderboard.partition_by("judge_key", as_dict=True, maintain_order=True).items()
    }


def _leaderboard_page(
    data: Phase2SiteData,
    page: PageMaker,
    labels: dict[str, str],
    model_href: Callable[[str, str], str | None],
    phase1_by_edition: pl.DataFrame,
) -> tuple[str, str]:
    at = PHASE2_INDEX
    judges = [
        {
            "judge": judge,
            "rows": [
                {
                    **r,
                    "label": labels.get(r["model_key"], r["model_key"]),
                    "href": model_href(at, r["model_key"]),
                }
                for r in rows
            ],
        }
        for judge, rows in judge_boards(data.leaderboard).items()
    ]
    items = [
        {**item, "href": relative(at, phase2_item_page(item["item_id"]))}
        for item in data.items.select("item_id", "edition", "area", "kind", "number", "max_points").iter_rows(
            named=True
        )
    ]
    return page(
        "site/phase2_index.html",
        at,
        judges=judges,
        editions=_side_by_side(data, labels, phase1_by_edition),
        agreement=data.agreement.to_dicts(),
        items=items,
    )


def _side_by_side(
    data: Phase2SiteData, labels: dict[str, str], phase1_by_edition: pl.DataFrame
) -> list[dict[str, Any]]:
    """Per edition of the 2nd phase: each judge × model's mean and exams passed there, beside the model's
    1st-phase score of the same edition when the warehouse has it, and the candidates' pass rate."""
    if data.scores.is_empty():
        editions = sorted(set(data.items["edition"].to_list()))
        per_edition = pl.DataFrame()
    else:
        editions = sorted(set(data.scores["edition"].to_list()))
        per_edition = data.scores.group_by("edition", "judge_key", "model_key").agg(
            mean_total=pl.col("total").filter(pl.col("complete")).mean(),
            exams_passed=pl.col("passed").fill_null(False).sum(),
            exams_total=pl.len(),
        )
    phase1 = {
        (r["edition"], r["model_key"]): r
        for r in (phase1_by_edition.iter_rows(named=True) if not phase1_by_edition.is_empty() else [])
    }
    out = []
    for edition in editions:
        rows = (
            per_edition.filter(pl.col("edition") == edition).sort("judge_key", "model_key").to_dicts()
            if not per_edition.is_empty()
            else []
        )
        for row in rows:
            row["label"] = labels.get(row["model_key"], row["model_key"])
            row["phase1"] = phase1.get((edition, row["model_key"]))
        out.append(
            {
                "edition": edition,
                "rows": rows,
                "has_phase1": any(row["phase1"] for row in rows),
                "pass_rate": data.pass_rate(edition),
            }
        )
    return out


def _item_pages(
    data: Phase2SiteData,
    page: PageMaker,
    labels: dict[str, str],
    model_href: Callable[[str, str], str | None],
) -> Iterator[tuple[str, str]]:
    standards = _by_item(data.standards)
    answers = _by_item(data.answers)
    judgments = _by_item(data.judgments)
    for item in data.items.iter_rows(named=True):
        item_id = item["item_id"]
        at = phase2_item_page(item_id)
        yield page(
            "site/phase2_item.html",
            at,
            item=item,
            turns=_turns(item),
            standards=standards.get(item_id, []),
            models=_model_blocks(
                answers.get(item_id, []), judgments.get(item_id, []), labels, model_href, at
            ),
            index_href=relative(at, PHASE2_INDEX),
        )


def _turns(item: dict[str, Any]) -> list[dict[str, Any]]:
    prompts = item.get("turn_prompts") or []
    points = item.get("turn_points") or []
    return [
        {"turn": i + 1, "prompt": prompt, "points": points[i] if i < len(points) else None}
        for i, prompt in enumerate(prompts)
    ]


def _model_blocks(
    answers: list[dict[str, Any]],
    judgments: list[dict[str, Any]],
    labels: dict[str, str],
    model_href: Callable[[str, str], str | None],
    at: str,
) -> list[SimpleNamespace]:
    """One block per model (and run, when a model has several): its answer per turn, each judge's
    correction of that turn beneath it; by the model's name, so a new model leaves the others in place."""
    runs: dict[tuple[str, str | None], dict[int, dict[str, Any]]] = {}
    for answer in answers:
        runs.setdefault((answer["model_key"], answer.get("run_id")), {})[answer["turn"]] = answer
    for judgment in judgments:  # a judged answer not in phase2_answers still shows its judgments
        runs.setdefault((judgment["model_key"], judgment.get("answer_run_id")), {})
    blocks = []
    for (model_key, run_id), turns in runs.items():
        judged = [
            j
            for j in judgments
            if j["model_key"] == model_key and (j.get("answer_run_id") in (run_id, None) or run_id is None)
        ]
        numbers = sorted(set(turns) | {j["turn"] for j in judged})
        blocks.append(
            SimpleNamespace(
                model_key=model_key,
                run_id=run_id,
                label=labels.get(model_key, model_key),
                href=model_href(at, model_key),
                turns=[
                    SimpleNamespace(
                        turn=n,
                        answer=turns.get(n),
                        judgments=sorted((j for j in judged if j["turn"] == n), key=lambda j: j["judge_key"]),
                    )
                    for n in numbers
                ],
            )
        )
    blocks.sort(key=lambda b: (str(b.label).casefold(), b.model_key, str(b.run_id)))
    return blocks


def _by_item(frame: pl.DataFrame) -> dict[str, list[dict[str, Any]]]:
    if frame.is_empty():
        return {}
    return {key: rows.to_dicts() for (key,), rows in frame.partition_by("item_id", as_dict=True).items()}

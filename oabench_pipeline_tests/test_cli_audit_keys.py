"""`oabench audit-keys`: which questions it prints, chosen by --editions or --suite as in `run` and `status`."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from oabench_pipeline.cli import main
from oabench_pipeline.warehouse import Warehouse

# One suspicious question in an edition of suite fgv-2010s (3-25), two in the study's (oabench-2026:
# 43-45), one in the 1st (suite `all` only), and a question nobody doubts.
FLAGGED = ["oab-10-1f-q7", "oab-43-1f-q55", "oab-44-1f-q63", "oab-1-1f-q2"]


def _audit_rows() -> pl.DataFrame:
    qids = [*FLAGGED, "oab-45-1f-q1"]
    return pl.DataFrame(
        {
            "qid": qids,
            "edition": [int(q.split("-")[1]) for q in qids],
            "number": [int(q.rsplit("q", 1)[1]) for q in qids],
            "correct": ["B", "B", "B", "A", "C"],
            "status": ["active"] * 5,
            "key_status": ["preliminary", "definitive", "definitive", "preliminary", "definitive"],
            "n_models": [6] * 5,
            "consensus": ["C", "C", "D", "B", "C"],
            "consensus_weight": [0.9, 1.0, 1.0, 0.85, 1.0],
            "key_weight": [0.1, 0.0, 0.0, 0.15, 1.0],
            "agreeing_models": [4] * 5,
            "suspicious": [True, True, True, True, False],
        }
    )


@pytest.fixture
def audited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Warehouse:
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    warehouse = Warehouse(tmp_path / "warehouse" / "oabench.duckdb")
    warehouse.write_partition("key_audit", _audit_rows())
    return warehouse


def _qids(*args: str) -> list[str]:
    result = CliRunner().invoke(main, ["audit-keys", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return [row["qid"] for row in json.loads(result.output)]


def test_suite_chooses_the_editions_whose_flagged_questions_are_printed(audited: Warehouse) -> None:
    assert _qids("--suite", "oabench-2026") == ["oab-43-1f-q55", "oab-44-1f-q63"]
    assert _qids("--suite", "fgv-2010s") == ["oab-10-1f-q7"]
    assert sorted(_qids("--suite", "all")) == sorted(FLAGGED)
    assert sorted(_qids()) == sorted(FLAGGED)  # no option: every edition
    assert _qids("--editions", "1-10") == ["oab-10-1f-q7", "oab-1-1f-q2"]  # ranges, as `run` reads them
    table = CliRunner().invoke(main, ["audit-keys", "--suite", "oabench-2026"])
    assert table.exit_code == 0, table.output
    assert table.output.splitlines()[0] == "2 suspicious of 3 questions (suite oabench-2026: editions 43-45)"
    assert "definitive" in table.output and "once `oabench site` has built them" in table.output


def test_suite_and_editions_are_usage_errors_together_or_unknown(audited: Warehouse) -> None:
    both = CliRunner().invoke(main, ["audit-keys", "--suite", "all", "--editions", "43"])
    assert both.exit_code == 2 and "--suite and --editions both choose the editions" in both.output
    unknown = CliRunner().invoke(main, ["audit-keys", "--suite", "nope"])
    assert unknown.exit_code == 2 and "unknown suite 'nope'" in unknown.output


def test_a_contested_key_under_later_law_comes_first_and_names_its_reforms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stored order of `key_audit` (a suspicious key under a later reform first) is the printed one,
    with that question's reforms; a question under none shows no reform."""
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    rows = _audit_rows().with_columns(
        possibly_superseded=pl.Series([True, False, False, True, False]),
        reforms_after=pl.Series(
            [["cpc-2015"], [], [], ["cpc-2015", "lawyers-statute-2022"], []], dtype=pl.List(pl.String)
        ),
    )
    ordered = rows.sort(["suspicious", "possibly_superseded"], descending=True, maintain_order=True)
    Warehouse(tmp_path / "warehouse" / "oabench.duckdb").write_partition("key_audit", ordered)
    printed = json.loads(CliRunner().invoke(main, ["audit-keys", "--format", "json"]).output)
    assert [r["qid"] for r in printed][:2] == ["oab-10-1f-q7", "oab-1-1f-q2"]
    assert [r["later law"] for r in printed] == ["cpc-2015", "cpc-2015, lawyers-statute-2022", None, None]
    assert "later law" in CliRunner().invoke(main, ["audit-keys"]).output


def test_each_question_says_which_key_document_its_answer_comes_from_and_unresolved_ones_follow(
    audited: Warehouse,
) -> None:
    keys = pl.DataFrame(
        {
            "qid": ["oab-10-1f-q7", "oab-43-1f-q55", "oab-28-1f-q37"],
            "edition": [10, 43, 28],
            "number": [7, 55, 37],
            "correct": ["B", "B", None],
            "status": ["active", "active", "unresolved"],
            "key_status": ["preliminary", "definitive", "preliminary"],
            "status_source": ["key", "key", "registry: unresolved"],
            "key_document": ["preliminary", "definitive", "preliminary"],
            "changed_after_preliminary": [False, None, None],
            "preliminary_correct": ["B", None, "D"],
            "status_note": [None, None, "unresolved: the later key is disputed"],
        },
        schema_overrides={"changed_after_preliminary": pl.Boolean},
    )
    for edition, rows in keys.partition_by("edition", as_dict=True).items():
        audited.write_partition("answer_keys", rows, str(edition[0]))
    rows = json.loads(CliRunner().invoke(main, ["audit-keys", "--format", "json"]).output)
    by_qid = {row["qid"]: row for row in rows}
    assert (by_qid["oab-10-1f-q7"]["key document"], by_qid["oab-10-1f-q7"]["changed after preliminary"]) == (
        "preliminary",
        False,
    )
    assert by_qid["oab-43-1f-q55"]["key document"] == "definitive"
    assert by_qid["oab-44-1f-q63"]["key document"] is None  # no answer_keys row: not known here
    table = CliRunner().invoke(main, ["audit-keys", "--suite", "all"]).output
    assert table.splitlines()[-1] == (
        "oab-28-1f-q37: unresolved, left out of both scores (unresolved: the later key is disputed)"
    )
    assert "oab-28-1f-q37" not in CliRunner().invoke(main, ["audit-keys", "--suite", "oabench-2026"]).output

"""The site's 2nd-phase pages and the candidates' pass rates, on a synthetic warehouse with phase-2 rows
written by the table contracts (`Warehouse.write_partition`): pages, links, escaping of replies and judgments,
and no phase-2 page or link when the warehouse has no phase-2 items."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from oabench_pipeline.core.site import SiteOptions, build_site, paths
from oabench_pipeline.warehouse import Warehouse
from oabench_pipeline_tests.core.synthetic_results import make_synthetic_warehouse, write_scored_warehouse
from oabench_pipeline_tests.site_pages import broken_links, tables

EDITION = 39
AREA = "direito_civil"
REPLY = "<script>window.pwned = true</script> EXCELENTÍSSIMO SENHOR"
JUDGMENT = "<img src=x onerror=alert(1)> A peça atende ao padrão. [[4,50]]"
STANDARD = "<b>Mandado</b> de segurança, art. 5º, LXIX"


@pytest.fixture(scope="module")
def plain_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    synthetic = make_synthetic_warehouse(n_models=2, n_editions=1, seed=5)
    root = tmp_path_factory.mktemp("phase2-site")
    write_scored_warehouse(synthetic.tables, root / "warehouse" / "oabench.duckdb")
    return root / "warehouse" / "oabench.duckdb"


def _copy(db_path: Path, tmp_path: Path) -> Warehouse:
    import shutil

    shutil.copytree(db_path.parent, tmp_path / "warehouse")
    store = Warehouse(tmp_path / "warehouse" / "oabench.duckdb")
    store.ensure_views()
    return store


def _build(store: Warehouse, out: Path) -> None:
    with store.reader() as con:
        build_site(con, out, store.tables(), SiteOptions())


def _write_phase2(store: Warehouse, model_key: str, first_phase_edition: int) -> None:
    items = pl.DataFrame(
        {
            "item_id": [f"{EDITION}_{AREA}_peca", f"{EDITION}_{AREA}_questao_1"],
            "edition": [EDITION, EDITION],
            "area": [AREA, AREA],
            "kind": ["piece", "question"],
            "number": [None, 1],
            "statement": ["Caso: <João> impetra...", "Questão sobre contratos"],
            "system": ["Você é um advogado.", "Você é um advogado."],
            "turn_prompts": [["Redija a peça."], ["A) Responda.", "B) Responda."]],
            "turn_points": [[5.0], [0.65, 0.6]],
            "max_points": [5.0, 1.25],
        }
    )
    store.write_partition("phase2_items", items, str(EDITION))
    standards = pl.DataFrame(
        {
            "item_id": [f"{EDITION}_{AREA}_peca"],
            "edition": [EDITION],
            "area": [AREA],
            "turn": [1],
            "standard": [STANDARD],
            "points": [5.0],
            "criteria": [[{"text": "Endereçamento", "max_points": 0.1, "allowed": [0.0, 0.1]}]],
        }
    )
    store.write_partition("phase2_standards", standards, str(EDITION))
    answers = pl.DataFrame(
        {
            "model_key": [model_key] * 3,
            "edition": [EDITION] * 3,
            "item_id": [
                f"{EDITION}_{AREA}_peca",
                f"{EDITION}_{AREA}_questao_1",
                f"{EDITION}_{AREA}_questao_1",
            ],
            "area": [AREA] * 3,
            "turn": [1, 1, 2],
            "run_id": ["oab-bench:abc"] * 3,
            "answer": [REPLY, "A resposta A", "A resposta B"],
            "truncated": [False, False, True],
        }
    )
    store.write_partition("phase2_answers", answers, f"{EDITION}|{model_key}")
    judgments = pl.DataFrame(
        {
            "judge_key": ["o3-2025-04-16"] * 3,
            "model_key": [model_key] * 3,
            "edition": [EDITION] * 3,
            "item_id": answers["item_id"],
            "area": [AREA] * 3,
            "turn": [1, 1, 2],
            "score": [4.5, 0.65, None],
            "max_points": [5.0, 0.65, 0.6],
            "valid": [True, True, False],
            "invalid_reason": [None, None, "no [[score]]"],
            "judgment": [JUDGMENT, "Correta [[0,65]]", "Sem nota"],
            "answer_run_id": ["oab-bench:abc"] * 3,
        }
    )
    store.write_partition("phase2_judgments", judgments, f"o3-2025-04-16|{model_key}")
    scores = pl.DataFrame(
        {
            "judge_key": ["o3-2025-04-16"],
            "model_key": [model_key],
            "edition": [EDITION],
            "area": [AREA],
            "total": [5.15],
            "complete": [False],
            "passed": [None],
            "missing": [0],
            "invalid": [1],
        },
        schema_overrides={"passed": pl.Boolean},
    )
    store.write_partition("phase2_scores", scores)
    # Two ranked models the paired tests cannot tell apart (rank range 1-2), then the incomplete one.
    leaderboard = pl.DataFrame(
        {
            "judge_key": ["o3-2025-04-16"] * 3,
            "rank": [1, 2, None],
            "rank_low": [1, 1, None],
            "rank_high": [2, 2, None],
            "model_key": ["ranked-a", "ranked-b", model_key],
            "mean_score": [8.52, 8.1, None],
            "mean_ci_low": [8.19, 7.5, None],
            "mean_ci_high": [8.84, 8.7, None],
            "exams_passed": [21, 20, 0],
            "exams_total": [21, 21, 1],
            "exams_complete": [21, 21, 0],
            "exams_incomplete": [0, 0, 1],
            "invalid": [0, 0, 1],
            "missing": [0, 0, 0],
            "ranked": [True, True, False],
        },
        schema_overrides={"rank": pl.Int64, "rank_low": pl.Int64, "rank_high": pl.Int64},
    )
    store.write_partition("phase2_leaderboard", leaderboard)
    rates = pl.DataFrame(
        {
            "edition": [first_phase_edition],
            "pass_rate": [0.1667],
            "approved": [19134],
            "denominator": [114763],
            "denominator_kind": ["present"],
            "stage": ["final"],
            "source_url": ["https://example.org/<rate>"],
            "source_title": ["Fonte <b>"],
        }
    )
    store.write_partition("candidate_pass_rates", rates)


def test_phase2_pages_links_and_escaping(plain_warehouse: Path, tmp_path: Path) -> None:
    store = _copy(plain_warehouse, tmp_path)
    model_key = store.read("leaderboard")["model_key"][0]
    first_phase_edition = store.read("editions")["edition"][0]
    _write_phase2(store, model_key, first_phase_edition)
    site = tmp_path / "site"
    _build(store, site)
    assert broken_links(site) == []
    index = (site / paths.PHASE2_INDEX).read_text(encoding="utf-8")
    assert 'href="fase2/index.html"' in (site / "index.html").read_text(
        encoding="utf-8"
    )  # linked from Início
    board = tables(index)["judge-1"]
    # phase2_leaderboard as stored: rank (rank range), mean with its 95% interval, exams passed.
    assert [row.cells[0:1] + row.cells[2:5] for row in board] == [
        ["1 (1–2)", "8,52", "8,19–8,84", "21/21"],
        ["2 (1–2)", "8,10", "7,50–8,70", "20/21"],
        ["—", "—", "—", "0/1 (0 completas)"],  # incomplete: no mean, not failed, unranked
    ]
    assert "não estão nos dados compartilhados" in index  # the 39th-41st 1st-phase booklets
    item = (site / paths.phase2_item_page(f"{EDITION}_{AREA}_peca")).read_text(encoding="utf-8")
    # Replies, judgments and the standard are untrusted: escaped, never markup.
    assert "&lt;script&gt;window.pwned = true&lt;/script&gt; EXCELENTÍSSIMO SENHOR" in item
    assert "&lt;img src=x onerror=alert(1)&gt;" in item and "<img src=x" not in item
    assert "&lt;b&gt;Mandado&lt;/b&gt;" in item and "Caso: &lt;João&gt;" in item
    assert "<strong>4,50</strong>/5,00" in item
    assert "Endereçamento" in item
    question = (site / paths.phase2_item_page(f"{EDITION}_{AREA}_questao_1")).read_text(encoding="utf-8")
    assert "inválida" in question and "no [[score]]" in question
    assert "cortada no limite de tokens" in question
    # The 1st-phase edition page shows the candidates' rate with its denominator and the caveat.
    edition = (site / paths.edition_page(first_phase_edition)).read_text(encoding="utf-8")
    assert "16,67%" in edition and "presentes" in edition and "Fonte &lt;b&gt;" in edition
    assert "não é uma distribuição de notas" in edition


def test_no_phase2_items_no_pages_and_no_link(plain_warehouse: Path, tmp_path: Path) -> None:
    store = _copy(plain_warehouse, tmp_path)
    site = tmp_path / "site"
    _build(store, site)
    assert not (site / "fase2").exists()
    assert "fase2/" not in (site / "index.html").read_text(encoding="utf-8")
    edition = (site / paths.edition_page(store.read("editions")["edition"][0])).read_text(encoding="utf-8")
    assert "Nenhuma taxa verificada desta edição." in edition
    assert broken_links(site) == []


def test_edition_pages_show_the_registrys_rate_before_the_table_is_written(tmp_path: Path) -> None:
    """Editions 8-9 (the registry has their rates); no `candidate_pass_rates` table in the warehouse."""
    synthetic = make_synthetic_warehouse(n_models=2, n_editions=2, first_edition=8, seed=4)
    write_scored_warehouse(synthetic.tables, tmp_path / "warehouse" / "oabench.duckdb")
    store = Warehouse(tmp_path / "warehouse" / "oabench.duckdb")
    assert not store.has_table("candidate_pass_rates")
    _build(store, tmp_path / "site")
    ix = (tmp_path / "site" / paths.edition_page(9)).read_text(encoding="utf-8")
    assert "16,67%" in ix and "19.134 aprovados / 114.763" in ix and "gazetadopovo.com.br" in ix

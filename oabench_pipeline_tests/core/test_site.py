"""The static site on a synthetic warehouse: pages, links, escaping, languages, and rebuilds that touch
only what changed (unchanged files keep their bytes and mtime). The real data's site, walked in Chromium:
`test_browser.py`."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import polars as pl
import pytest

from oabench_pipeline.core.site import SiteOptions, SiteResult, build_site, paths
from oabench_pipeline.core.site.labels import Words
from oabench_pipeline.warehouse import Warehouse
from oabench_pipeline_tests.core.synthetic_results import (
    make_synthetic_warehouse,
    rescore,
    write_scored_warehouse,
)
from oabench_pipeline_tests.site_pages import broken_links, tables

REPLY = "<script>window.pwned = true</script><img src=x onerror=alert(1)> B"
NEW_KEY = "acme/new-model"


@pytest.fixture(scope="module")
def warehouse_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4 keys x 2 editions, one reply carrying HTML; scored and ranked once for the module."""
    synthetic = make_synthetic_warehouse(n_models=4, n_editions=2, seed=3)
    inferences = pl.from_arrow(synthetic.tables["inferences"])
    assert isinstance(inferences, pl.DataFrame)
    first = inferences.filter(~pl.col("skipped")).row(0, named=True)
    planted = (pl.col("qid") == first["qid"]) & (pl.col("model_key") == first["model_key"])
    inferences = inferences.with_columns(
        raw_response=pl.when(planted).then(pl.lit(REPLY)).otherwise("raw_response")
    )
    tables = {**synthetic.tables, "inferences": inferences.to_arrow()}
    root = tmp_path_factory.mktemp("site-warehouse")
    write_scored_warehouse(tables, root / "warehouse" / "oabench.duckdb")
    return root


@pytest.fixture
def store(warehouse_template: Path, tmp_path: Path) -> Warehouse:
    import shutil

    shutil.copytree(warehouse_template / "warehouse", tmp_path / "warehouse")
    store = Warehouse(tmp_path / "warehouse" / "oabench.duckdb")
    store.ensure_views()  # the copy's catalogue names the template's folder
    return store


@pytest.fixture(scope="module")
def site_template(warehouse_template: Path) -> tuple[Path, SiteResult]:
    """The Portuguese site of the template warehouse, built once (tests copy it, mtimes kept)."""
    store = Warehouse(warehouse_template / "warehouse" / "oabench.duckdb")
    return warehouse_template / "site", build(store, warehouse_template / "site")


def copied_site(site_template: tuple[Path, SiteResult], target: Path) -> Path:
    import shutil

    shutil.copytree(site_template[0], target)  # copy2: bytes and mtimes as built
    return target


def build(store: Warehouse, out: Path, lang: str = "pt") -> SiteResult:
    with store.reader() as con:
        return build_site(con, out, store.tables(), SiteOptions(lang="en" if lang == "en" else "pt"))


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    }


def test_pages_links_and_escaping(store: Warehouse, site_template: tuple[Path, SiteResult]) -> None:
    site, result = site_template
    keys = store.read("leaderboard")["model_key"].to_list()
    slugs = paths.model_slugs(keys)
    questions = store.read("questions")
    assert sorted(p.name for p in (site / "modelo").iterdir()) == sorted(f"{s}.html" for s in slugs.values())
    assert len(list((site / "questao").iterdir())) == questions.height
    assert len(list((site / "edicao").iterdir())) == store.read("editions").height
    assert result.pages == 1 + len(keys) + store.read("editions").height + questions.height + 2
    assert broken_links(site) == []
    # The weird key (quotes, a semicolon, unicode) gets a plain file name, and its page is linked.
    assert all(
        set(s) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        for s in slugs.values()
    )
    # A reply is untrusted text: escaped, never markup.
    planted = store.query("select qid from inferences where raw_response = $r", {"r": REPLY})["qid"][0]
    page = (site / paths.question_page(planted)).read_text(encoding="utf-8")
    assert "&lt;script&gt;window.pwned = true&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt; B" in page
    assert "<script>window" not in page and "<img src=x" not in page
    # Início lists the leaderboard in its order, figures as the warehouse holds them.
    rows = tables((site / "index.html").read_text(encoding="utf-8"))["leaderboard"]
    assert [r.attrs["data-model-key"] for r in rows] == keys
    words = Words("pt")
    board = store.read("leaderboard")
    for row, expected in zip(rows, board.iter_rows(named=True), strict=True):
        assert row.cells[4] == words.pct(expected["official_accuracy"])
        assert row.cells[8] == words.cost(expected["effective_cost_usd"], expected["cost_source"])


@pytest.mark.slow
def test_an_inicio_per_suite_with_a_switcher(store: Warehouse, tmp_path: Path) -> None:
    """Two suites: index.html ranks the default one (or `--suite`'s), suite/<name>.html each other one,
    each as `leaderboard_by_suite` holds it, editions passed counted over that suite's editions only."""
    from oabench_pipeline.core.editions import Suite
    from oabench_pipeline.core.leaderboard import build_leaderboard_tables
    from oabench_pipeline.core.reports import passed_text

    first, second = sorted(store.read("editions")["edition"].to_list())
    suites = [Suite(name="oabench-2026", editions=(first,)), Suite(name="all", editions=(first, second))]
    with store.reader() as con:
        built = build_leaderboard_tables(con, suites=suites)
    for name, frame in built.items():
        store.write_partition(name, frame)
    by_suite = store.read("leaderboard_by_suite")
    site = tmp_path / "site"
    build(store, site)
    for page, suite, ran in (("index.html", "oabench-2026", 1), ("suite/all.html", "all", 2)):
        html = (site / page).read_text(encoding="utf-8")
        rows = tables(html)["leaderboard"]
        expected = by_suite.filter(pl.col("suite") == suite).sort(
            "rank", "official_score", "model_key", descending=[False, True, False], nulls_last=True
        )
        assert [r.attrs["data-model-key"] for r in rows] == expected["model_key"].to_list(), page
        for row, want in zip(rows, expected.iter_rows(named=True), strict=True):
            assert row.cells[3] == f"{want['official_score']}/{want['official_total']}"
            assert row.cells[6] == passed_text(want, ran, "de")  # not every edition the key ran
        assert f'class="current" aria-current="page">{suite}</a>' in html
    assert 'href="suite/all.html"' in (site / "index.html").read_text(encoding="utf-8")
    assert 'href="../index.html" title' in (site / "suite" / "all.html").read_text(encoding="utf-8")
    assert (site / paths.chart("suite/all/custo-vs-acuracia")).is_file()
    assert broken_links(site) == []

    # `--suite all`: that suite on index.html, the default one beside it; the old suite page removed.
    with store.reader() as con:
        other = build_site(con, site, store.tables(), SiteOptions(suite="all"))
    assert "suite/all.html" in other.removed and (site / "suite" / "oabench-2026.html").is_file()
    rows = tables((site / "index.html").read_text(encoding="utf-8"))["leaderboard"]
    assert len(rows) == by_suite.filter(pl.col("suite") == "all").height
    assert broken_links(site) == []
    with store.reader() as con, pytest.raises(ValueError, match="suite 'nope' is not in the suites table"):
        build_site(con, tmp_path / "never", store.tables(), SiteOptions(suite="nope"))
    assert not (tmp_path / "never").exists()


def test_every_shipped_suite_has_its_portuguese_description() -> None:
    """The registry's suites read in Portuguese on the Portuguese site: a description edited in the
    registry fails here until its translation follows (the site shows the English text meanwhile)."""
    from oabench_pipeline.core.editions import load_suites
    from oabench_pipeline.core.site.labels import SUITE_DESCRIPTIONS_PT

    assert {s.description for s in load_suites().values()} <= set(SUITE_DESCRIPTIONS_PT)


def test_a_model_with_no_answer_reads_no_answer_not_dashes_and_wrong(
    store: Warehouse, site_template: tuple[Path, SiteResult], tmp_path: Path
) -> None:
    """A reply in which no letter was read: "sem resposta", not `— — ✗ errada`; still not counted right."""
    site, _ = site_template
    unanswered = store.query(
        "select qid, model_key from scores where answer is null and not skipped and not has_error limit 1"
    ).row(0, named=True)
    page = (site / paths.question_page(unanswered["qid"])).read_text(encoding="utf-8")
    answers = tables(page)["answers"]
    [row] = [r for r in answers if r.attrs["data-model-key"] == unanswered["model_key"]]
    assert row.cells[1:4] == ["", "", "sem resposta"]
    assert 'title="Nenhuma alternativa lida na resposta: conta como não acertada."' in page
    right = sum(r.cells[3].startswith("✓") for r in answers)
    assert (
        f"({right}/{len(answers)})" in page
    )  # "Modelos que acertaram": the no-answer row among the not right

    build(store, tmp_path / "en", lang="en")
    english = (tmp_path / "en" / paths.question_page(unanswered["qid"])).read_text(encoding="utf-8")
    [row] = [r for r in tables(english)["answers"] if r.attrs["data-model-key"] == unanswered["model_key"]]
    assert row.cells[1:4] == ["", "", "no answer"]


def test_english_labels(store: Warehouse, tmp_path: Path) -> None:
    build(store, tmp_path / "en", lang="en")
    index = (tmp_path / "en" / "index.html").read_text(encoding="utf-8")
    assert '<html lang="en">' in index and "Leaderboard" in index and "Classificação" not in index
    assert "Methodology" in (tmp_path / "en" / "metodologia.html").read_text(encoding="utf-8")


@pytest.mark.slow
def test_rebuild_rewrites_only_what_changed(
    store: Warehouse, site_template: tuple[Path, SiteResult], tmp_path: Path
) -> None:
    site = copied_site(site_template, tmp_path / "site")
    assert len(site_template[1].written) == site_template[1].files  # the first build wrote every file
    (site / "CNAME").write_text("oabench.example.org\n")  # a file of the person's (a GitHub Pages domain)
    before = snapshot(site)
    again = build(store, site)
    assert again.written == [] and again.removed == []
    assert snapshot(site) == before  # same bytes, same mtimes

    # One new cell: a new key answers the first edition (a copy of a key's answers, an hour later).
    editions = sorted(store.read("editions")["edition"].to_list())
    inferences = store.read("inferences")
    copied = inferences.filter(
        (pl.col("model_key") == inferences["model_key"][0]) & (pl.col("edition") == editions[0])
    ).with_columns(
        model_key=pl.lit(NEW_KEY),
        model=pl.lit(NEW_KEY),
        run_id=pl.lit("new-run"),
        created_at=pl.col("created_at") + dt.timedelta(hours=1),
    )
    items_before = store.read("item_analysis")
    store.write_partition("inferences", copied, "new-cell")
    rescore(store)
    changed = build(store, site)
    written = set(changed.written)
    questions = store.read("questions")
    first_edition = {
        paths.question_page(q) for q in questions.filter(pl.col("edition") == editions[0])["qid"]
    }
    assert first_edition <= written  # each question of that edition shows one more answer
    # In the other edition only the questions whose shown item analysis moved (a new key changes which
    # keys are the strong ones behind the suspicious-key flag) are rewritten; the others keep their file.
    shown = ["qid", "n_models", "share_correct", "flag"]  # what a question page shows of its item analysis
    moved = (
        store.read("item_analysis")
        .select(shown)
        .join(items_before.select(shown), on=shown, how="anti", nulls_equal=True)
    )
    other = questions.filter(pl.col("edition") == editions[1])
    still = {paths.question_page(q) for q in other.join(moved, on="qid", how="anti")["qid"]}
    assert still and not still & written
    new_page = paths.model_page(paths.model_slugs([NEW_KEY])[NEW_KEY])
    assert {paths.INDEX, paths.edition_page(editions[0]), new_page} <= written
    after = snapshot(site)
    for unchanged in set(before) - written - {".oabench-site.json"}:
        assert after[unchanged] == before[unchanged], unchanged  # bytes and mtime kept
    assert changed.unchanged == changed.files - len(written)

    # The cell gone again: its model page is removed, everything else is as before the cell.
    (store.table_dir("inferences") / "new-cell.parquet").unlink()
    rescore(store)
    gone = build(store, site)
    chart = paths.chart(f"latencia/{paths.model_slugs([NEW_KEY])[NEW_KEY]}")
    assert gone.removed == sorted([new_page, chart]) and not (site / new_page).exists()
    assert broken_links(site) == []
    assert {k: v[0] for k, v in snapshot(site).items()} == {k: v[0] for k, v in before.items()}
    assert snapshot(site)["CNAME"] == before["CNAME"]  # never the site's to remove or rewrite


def test_law_currency_on_question_pages_and_the_current_law_view(
    store: Warehouse, site_template: tuple[Path, SiteResult]
) -> None:
    """A question under a later reform says which, with its official source and the disclaimer; one under
    none says nothing; Início shows the ranking on the current-law questions and each flag's count."""
    site, _ = site_template
    currency = store.read("question_law_currency").sort("qid")
    flagged = currency.filter(pl.col("possibly_superseded")).row(0, named=True)
    current = currency.filter(~pl.col("possibly_superseded")).row(0, named=True)
    reforms = {r["reform"]: r for r in store.read("legal_reforms").iter_rows(named=True)}
    page = (site / paths.question_page(flagged["qid"])).read_text(encoding="utf-8")
    words = Words("pt")
    assert 'id="possibly-superseded"' in page and words.t("law_flag_note") in page
    for reform in flagged["reforms_after"]:
        assert f'<a href="{reforms[reform]["source_url"]}">{reforms[reform]["act"]}</a>' in page
    assert 'id="law-currency"' not in (site / paths.question_page(current["qid"])).read_text(encoding="utf-8")
    index = (site / "index.html").read_text(encoding="utf-8")
    found = tables(index)
    board = store.read("leaderboard_current_law")
    suite = store.read("suites").filter(pl.col("is_default")).row(0, named=True)
    rows = board.filter(pl.col("suite") == suite["suite"])
    assert [r.attrs["data-model-key"] for r in found["current-law"]] == rows["model_key"].to_list()
    counts = {r.cells[0]: int(r.cells[1]) for r in found["flag-counts"]}
    assert counts["direito vigente"] == suite["questions_current_law"]
    assert counts["possivelmente superadas"] == suite["questions_possibly_superseded"]
    assert words.t("law_flag_note") in index


def test_a_question_page_says_where_its_answer_comes_from(store: Warehouse, tmp_path: Path) -> None:
    """Key provenance (`answer_keys`): the document, a change after the preliminary key, an unresolved key."""
    partition = store.partitions("answer_keys")[0]
    part = store.read("answer_keys", partition).sort("number")
    changed, unresolved = part["qid"][0], part["qid"][1]
    part = part.with_columns(
        key_document=pl.lit("preliminary"),
        changed_after_preliminary=pl.col("qid") == changed,
        preliminary_correct=pl.when(pl.col("qid") == changed).then(pl.lit("Z")).otherwise("correct"),
        status=pl.when(pl.col("qid") == unresolved).then(pl.lit("unresolved")).otherwise("status"),
        correct=pl.when(pl.col("qid") == unresolved).then(None).otherwise("correct"),
        status_note=pl.when(pl.col("qid") == changed)
        .then(pl.lit("changed from Z by the examiners' notice"))
        .when(pl.col("qid") == unresolved)
        .then(pl.lit("unresolved: transcriptions disagree"))
        .otherwise(None),
    )
    store.write_partition("answer_keys", part, partition)
    site = tmp_path / "site-en"
    build(store, site, lang="en")
    page = (site / paths.question_page(changed)).read_text(encoding="utf-8")
    assert re.search(
        r'id="key-document">preliminary · <span class="badge warn">changed after the preliminary key', page
    )
    assert "Z in the preliminary key" in page and "changed from Z by the examiners&#39; notice" in page
    page = (site / paths.question_page(unresolved)).read_text(encoding="utf-8")
    assert "unresolved</span> Its later key is unknown and disputed: left out of both scores" in page
    assert "unresolved: transcriptions disagree" in page
    edition = site / paths.edition_page(int(unresolved.split("-")[1]))  # qid: oab-<edition>-1f-q<n>
    assert "1 unresolved: Its later key is unknown and disputed" in edition.read_text(encoding="utf-8")

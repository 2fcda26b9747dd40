"""What a person sees in a browser: the Dagster UI, the HTML report and the static site, in headless Chromium.

A warehouse with the three editions and the published OABench runs imported (`oabench import`, so the
leaderboard, the report and the aborted GPT-5 Mini run are all there), plus one run whose replies carry
HTML (`run_folders.html_reply_run`), is served by a real `dagster-webserver` on 127.0.0.1; Chromium
(Debian's `chromium`, driven by Playwright) loads the asset graph, the `inferences` asset's Checks tab, an
analysis table's asset page (`pairwise_comparison`: description, columns, its own checks),
`leaderboard_report`'s latest materialization (its inline summary, and a chart opened from "[Show
Markdown]"), then the HTML report file, and the test asserts on what the pages render. `oabench site`
then builds the static site, and the site's tests walk it from `file://` (Início → a model → a question
it missed → the edition), checked against the warehouse. Without Chromium (or Playwright) the browser
tests are skipped, except in CI (`CI=true`), where `.ci/run` installs Chromium and its absence is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from oabench_pipeline.cli.output import cost_text, render_cell
from oabench_pipeline.core.numbers import grouped, short_decimal
from oabench_pipeline.core.site import paths
from oabench_pipeline.core.site.data import CANONICAL_SCORES_SQL
from oabench_pipeline.core.site.labels import Words
from oabench_pipeline.core.site.recompute import RECIPES
from oabench_pipeline.core.tables import ANALYSIS_TABLES
from oabench_pipeline.warehouse import Warehouse
from oabench_pipeline_tests.pipeline_env import PipelineEnv, copy_ingested, make_env
from oabench_pipeline_tests.run_folders import HTML_MARKUP, HTML_MODEL, html_reply_run
from oabench_pipeline_tests.servers.chromium import Browser, find_chromium, images
from oabench_pipeline_tests.servers.dagster_webserver import DagsterWebserver, write_instance_yaml
from oabench_pipeline_tests.servers.static_files import StaticFileServer
from oabench_pipeline_tests.servers.ui_graphql import (
    ADD_PARTITION,
    ASSET_GRAPH_QUERY,
    EXPECTED_GROUPS,
    LAUNCH_RUN,
    PARTITION_STATUS,
    column_schema,
    failure_text,
    wait_for_run,
)
from oabench_pipeline_tests.site_pages import broken_links, tables

# Slow: a webserver and Chromium.
# Left out of the default run; `.ci/run` runs it after (`pytest -m slow`).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

# Every group expanded but `analysis`: its twelve sibling tables make a column taller than any zoom the
# lineage page fits to; collapsed, it is one box between `scores` and the report.
GROUPS = ("sources", "exams", "inference", "scoring", "reports")
GRAPH_PATH = "/asset-groups?expanded=" + ",".join(f"global@global:{g}" for g in GROUPS)


def chromium_or_skip() -> str:
    chromium = find_chromium()
    if chromium is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(
                "CI=true but no Chromium on PATH: .ci/run installs Debian's chromium before the tests"
            )
        pytest.skip("no Chromium on PATH (apt-get install chromium); CI installs it and runs this test")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.fail("the playwright package is missing: pip install -e '.[dev]'")
    return chromium


@dataclass
class Published:
    """The warehouse of the published runs (and the HTML-reply run), imported by `oabench import`."""

    env: PipelineEnv
    root: Path


@dataclass
class Ui:
    env: PipelineEnv
    server: DagsterWebserver
    chromium: str


@pytest.fixture(scope="module")
def published(
    tmp_path_factory: pytest.TempPathFactory,
    ingested_template: Path,
    mirror_server: StaticFileServer,
    shared_oab: Path,
) -> Iterator[Published]:
    root = tmp_path_factory.mktemp("browser")
    runs = root / "runs"
    for folder in (shared_oab / "published-runs").iterdir():
        shutil.copytree(folder, runs / folder.name)
    html_reply_run(shared_oab / "published-runs", runs)
    with pytest.MonkeyPatch.context() as monkeypatch:
        env = make_env(root, monkeypatch, mirror_server.base_url)
        monkeypatch.setenv("OABENCH_PORTAL_URL", mirror_server.base_url)  # no sensor reaches the real portal
        write_instance_yaml(
            root / "dagster_home"
        )  # the UI's instance settings, before the CLI writes its own
        copy_ingested(ingested_template, env.settings.warehouse_path.parent)
        result = env.cli("import", str(runs))
        assert result.exit_code == 0, result.output
        yield Published(env, root)


@pytest.fixture(scope="module")
def webserver(published: Published, mirror_server: StaticFileServer) -> Iterator[DagsterWebserver]:
    """One `dagster-webserver` on the imported warehouse for the file: Chromium's tests and the GraphQL one."""
    server_env = {
        "OABENCH_WAREHOUSE": str(published.env.settings.warehouse_path),
        "OABENCH_SOURCE_BASE_URL": mirror_server.base_url,
        "OABENCH_PORTAL_URL": mirror_server.base_url,  # nothing reaches the real portal, even from a sensor
    }
    with DagsterWebserver(published.root / "dagster_home", server_env) as server:
        yield server


@pytest.fixture(scope="module")
def ui(published: Published, webserver: DagsterWebserver) -> Ui:
    return Ui(published.env, webserver, chromium_or_skip())


@pytest.fixture(scope="module")
def browser(built_site: Path) -> Iterator[Browser]:
    """One Chromium for the file (a launch per test was most of each test's time): every test starts by
    navigating, so none sees another's page. The site is built first: Playwright's sync API leaves an
    event loop on the thread, which an in-process Dagster run after it would trip over."""
    with Browser(chromium_or_skip()) as page:
        yield page


def test_asset_graph_shows_every_group_and_asset(ui: Ui, browser: Browser) -> None:
    browser.goto(ui.server.url + GRAPH_PATH)
    browser.wait_for_text(
        "editions", "exam_pdfs", "answer_keys", "questions", "inferences", "scores", "leaderboard_report",
        "published_runs",
    )  # fmt: skip
    # The collapsed `analysis` group is drawn as a box in the graph, besides its entry in the side list.
    assert browser.count_text("analysis") >= 2


def test_checks_tab_shows_descriptions_and_no_failure_for_the_aborted_run(ui: Ui, browser: Browser) -> None:
    """Every check says what it checks; the aborted published run is an observation, not a failed check
    (a newcomer who imports the published runs is not greeted by a red asset for an expected gap)."""
    browser.goto(ui.server.url + "/assets/inferences?view=checks")
    page = browser.wait_for_text(
        "every_active_question_has_a_row", "one_row_per_question", "error_rate_at_most_2_percent"
    )
    assert "No description provided" not in page
    browser.click_text("every_active_question_has_a_row")
    page = browser.wait_for_text("Each active question of the edition has an answer")
    assert "Failed" not in page


def test_an_analysis_table_has_its_own_asset_page(ui: Ui, browser: Browser) -> None:
    """`pairwise_comparison` is an asset: its description, its columns and its own passed checks."""
    browser.goto(ui.server.url + "/assets/pairwise_comparison")
    browser.wait_for_text("pairwise_comparison", "McNemar", "p_holm", "a_only_correct", "Holm's correction")
    browser.goto(ui.server.url + "/assets/pairwise_comparison?view=checks")
    page = browser.wait_for_text("one_row_per_pair", "p_values_valid", "Passed")
    assert "No description provided" not in page
    assert "edition_sums_equal_aggregate" not in page  # the leaderboard's checks stay on its own page


def test_report_materialization_shows_summary_inline_and_charts(ui: Ui, browser: Browser) -> None:
    browser.goto(ui.server.url + "/assets/leaderboard_report?view=events")
    page = browser.wait_for_text(
        "summary", "Data as of", "Grok 4.1 Fast: 85.0%", "1 incomplete, unranked", "cost_vs_accuracy"
    )
    assert "Generated" in page  # the summary is drawn inline, not behind a link
    # An embedded PNG is longer than the UI's 1,000-character inline limit: it opens in a dialog.
    labels = browser.count_text("[Show Markdown]")
    assert labels >= 4  # the full leaderboard and the three charts (two models have a knowledge cutoff)
    charts = []
    for index in range(labels):
        browser.click_text("[Show Markdown]", index)
        # The dialog once drawn: its chart, or its text when it has none.
        browser.wait_until(
            "!!document.querySelector('[role=dialog] img') || "
            "(document.querySelector('[role=dialog]')?.innerText || '').trim()",
            "the Markdown dialog",
        )
        charts += images(browser, "[role=dialog]")
        if browser.count_text("Close"):
            browser.click_text("Close")
            browser.wait_until("!document.querySelector('[role=dialog]')", "the dialog closed")
    assert len(charts) == 3, charts
    assert all(c["loaded"] and c["width"] > 500 for c in charts), charts


def test_html_report_renders_its_charts(ui: Ui, browser: Browser) -> None:
    report = ui.env.settings.warehouse_path.parent / "reports" / "leaderboard.html"
    browser.goto(report.as_uri())
    page = browser.wait_for_text("OABench leaderboard", "Data as of", "Per edition", "Rank (range)")
    assert "0/1 run (45) of 3" in page  # the aborted GPT-5 Mini run says what it covered
    drawn = images(browser)
    assert len(drawn) == 3  # cost vs accuracy, accuracy by area, accuracy by exam date (cutoffs)
    for image in drawn:
        assert image["loaded"] and image["width"] > 500, image
        assert image["inView"], f"chart wider than the page: {image}"  # the heatmap is seen whole


def test_partition_view_shows_the_aborted_cell_as_missing(ui: Ui, browser: Browser) -> None:
    """The cell `oabench status` calls missing (an aborted published run only) is neither green
    "Materialized" nor red "Failed" in the partition view."""
    browser.goto(ui.server.url + "/assets/inferences?view=partitions")
    # 16 imported cells: 15 complete, the aborted GPT-5 Mini one missing; GPT-5 Mini never ran 43 and 44.
    browser.wait_for_text("openai/gpt-5-mini", "Failed (0)", "Materialized (15)", "Missing (3)")


# --- the static site -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built_site(published: Published) -> Path:
    """`oabench site` over the imported warehouse (built once; the tests only read it)."""
    result = published.env.cli("site")
    assert result.exit_code == 0, result.output
    folder = published.env.settings.warehouse_path.parent / "site"
    assert f"open {folder / 'index.html'}" in result.output
    return folder


def _warehouse(published: Published) -> Warehouse:
    return Warehouse(published.env.settings.warehouse_path)


def _terminal_board(published: Published) -> list[dict]:
    result = published.env.cli("leaderboard", "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_site_has_a_page_per_model_edition_and_question_and_every_link_resolves(
    published: Published, built_site: Path
) -> None:
    store = _warehouse(published)
    keys = store.query("select model_key from leaderboard")["model_key"].to_list()
    slugs = paths.model_slugs(keys)
    assert {p.name for p in (built_site / "modelo").iterdir()} == {f"{slugs[k]}.html" for k in keys}
    editions = store.query("select edition from editions")["edition"].to_list()
    assert {p.name for p in (built_site / "edicao").iterdir()} == {f"{e}.html" for e in editions}
    qids = store.query("select qid from questions")["qid"].to_list()
    assert len(qids) == 240
    assert {p.name for p in (built_site / "questao").iterdir()} == {f"{q}.html" for q in qids}
    assert broken_links(built_site) == []
    # The key audit's flag, on exactly the questions it flags.
    suspicious = set(store.query("select qid from key_audit where suspicious")["qid"].to_list())
    flagged = {q for q in qids if 'id="suspicious"' in (built_site / "questao" / f"{q}.html").read_text()}
    assert suspicious and flagged == suspicious
    for table in store.tables():  # every warehouse table offered in both formats
        assert (built_site / "dados" / f"{table}.csv").is_file() and (
            built_site / "dados" / f"{table}.parquet"
        ).is_file()


def test_site_walk_home_model_missed_question_edition(
    published: Published, built_site: Path, browser: Browser
) -> None:
    """Início → the top model → a question it missed → that question's edition, each checked against the
    warehouse; no page asks for anything outside the site folder."""
    store, words = _warehouse(published), Words("pt")
    board = _terminal_board(published)
    browser.new_page()  # the UI's page polls its server: not this test's requests
    browser.goto((built_site / "index.html").as_uri())
    shown = browser.evaluate(
        "[...document.querySelectorAll('#leaderboard tbody tr')].map(r => "
        "({key: r.dataset.modelKey, cells: [...r.cells].map(c => c.innerText.trim())}))"
    )
    assert [row["key"] for row in shown] == [
        row["model_key"] for row in board
    ]  # `oabench leaderboard`'s order
    for row, expected in zip(shown, board, strict=True):
        rank, _, _, score, accuracy, interval, *_ = row["cells"]
        assert rank.split()[0] == (str(expected["rank"]) if expected["rank"] is not None else "—")
        assert score == f"{expected['official_score']}/{expected['official_total']}"
        assert accuracy == words.pct(expected["official_accuracy"])
        assert interval == words.interval(expected["accuracy_ci_low"], expected["accuracy_ci_high"])

    top = board[0]["model_key"]
    browser.page.click(f"#leaderboard tr[data-model-key='{top}'] a")
    browser.wait_for_text(board[0]["label"], "Questões erradas")
    missed = store.query(
        f"""WITH c AS ({CANONICAL_SCORES_SQL})
            SELECT qid, edition, number, answer, correct FROM c
            WHERE model_key = $key AND status = 'active' AND NOT coalesce(is_correct_technical, false)
            ORDER BY edition, number""",
        {"key": top},
    )
    links = browser.evaluate("[...document.querySelectorAll('#missed tbody a')].map(a => a.innerText)")
    assert links == [str(n) for n in missed["number"]]
    first = missed.row(0, named=True)
    browser.page.click("#missed tbody tr:first-child a")
    browser.wait_for_text("Enunciado", "Respostas dos modelos")
    assert browser.page.url.endswith(f"questao/{first['qid']}.html")
    assert browser.page.inner_text("#official-answer").startswith(first["correct"])
    stem = store.query("select stem from questions where qid = $qid", {"qid": first["qid"]})["stem"][0]
    assert browser.evaluate("document.querySelector('#stem').textContent") == stem  # exactly as extracted
    answer_row = browser.evaluate(
        f"[...document.querySelector(\"#answers tr[data-model-key='{top}']\").cells].map(c => c.innerText.trim())"
    )
    if first["answer"] is not None:
        assert answer_row[1] == first["answer"] and "errada" in answer_row[3]
    else:  # no letter read in the reply (or an error row): said so, never "— — ✗ errada"
        assert answer_row[3] in ("sem resposta", "erro")

    browser.page.click(f"nav.pager a[href='../edicao/{first['edition']}.html']")
    browser.wait_for_text("Arquivos oficiais", "Modelos que acertaram")
    share = store.query("select share_correct from item_analysis where qid = $qid", {"qid": first["qid"]})
    cell = browser.page.inner_text(f"#questions tr[data-qid='{first['qid']}'] td:nth-child(4)")
    assert cell.startswith(words.pct(share["share_correct"][0], 0))
    sha = store.query("select booklet_sha256 from editions where edition = $e", {"e": first["edition"]})
    assert sha["booklet_sha256"][0] in browser.page.inner_text("#files")

    site_prefix = built_site.resolve().as_uri() + "/"
    assert browser.requests and all(url.startswith(site_prefix) for url in browser.requests), browser.requests


def test_site_suite_switcher_matches_oabench_leaderboard_suite(
    published: Published, built_site: Path, browser: Browser
) -> None:
    """Início's switcher opens each other suite's ranking, as `oabench leaderboard --suite` prints it."""
    words = Words("pt")
    browser.new_page()
    browser.goto((built_site / "index.html").as_uri())
    suites = browser.evaluate("[...document.querySelectorAll('#suites a')].map(a => a.innerText)")
    expected = [
        r["suite"]
        for r in json.loads(published.env.cli("sql", "select suite from suites", "--format", "json").output)
    ]
    assert suites == expected and "all" in suites
    browser.page.click("#suites a:text-is('all')")
    browser.wait_for_text("Conjunto all")
    assert browser.page.url.endswith("suite/all.html")
    result = published.env.cli("leaderboard", "--suite", "all", "--format", "json")
    assert result.exit_code == 0, result.output
    board = json.loads(result.output)
    shown = browser.evaluate(
        "[...document.querySelectorAll('#leaderboard tbody tr')].map(r => "
        "({key: r.dataset.modelKey, cells: [...r.cells].map(c => c.innerText.trim())}))"
    )
    assert [row["key"] for row in shown] == [row["model_key"] for row in board]
    for row, want in zip(shown, board, strict=True):
        rank, _, _, score, accuracy, *_ = row["cells"]
        assert rank.split()[0] == (str(want["rank"]) if want["rank"] is not None else "—")
        assert score == f"{want['official_score']}/{want['official_total']}"
        assert accuracy == words.pct(want["official_accuracy"])
    browser.page.click("#suites a:text-is('oabench-2026')")
    browser.wait_for_text("Conjunto oabench-2026")
    assert browser.page.url.endswith("/index.html")
    site_prefix = built_site.resolve().as_uri() + "/"
    assert all(url.startswith(site_prefix) for url in browser.requests), browser.requests


def test_a_reply_with_html_is_shown_as_text(built_site: Path, browser: Browser) -> None:
    browser.new_page()  # the UI's page polls its server: not this test's requests
    browser.goto((built_site / "questao" / "oab-43-1f-q14.html").as_uri())
    reply = f"#answers tr[data-model-key='{HTML_MODEL}'] .reply"
    assert browser.page.inner_text(reply).startswith(HTML_MARKUP.strip())  # the characters, shown
    assert browser.evaluate("window.pwned === undefined")  # the script never ran
    assert browser.evaluate(f'document.querySelectorAll("{reply} *").length') == 0  # no <b>, no <script>
    # The page's own sorting script works: a click sorts the answers by model name.
    browser.page.click("#answers th:first-child")
    names = browser.evaluate(
        "[...document.querySelectorAll('#answers tbody td:first-child')].map(c => c.innerText)"
    )
    assert names == sorted(names, key=str.casefold) or names == sorted(names)
    assert all(url.startswith(built_site.resolve().as_uri()) for url in browser.requests)


def test_site_report_terminal_and_sql_agree_on_every_figure_they_share(
    published: Published, built_site: Path
) -> None:
    """One truth: the figures of `oabench leaderboard` (json and table), the SQL recipes of the Dados page
    run through `oabench sql`, the HTML report and the site's Início, model by model."""
    words = Words("pt")
    board = {row["model_key"]: row for row in _terminal_board(published)}
    recipes = {}
    for recipe in RECIPES:
        result = published.env.cli("sql", recipe.sql, "--format", "json")
        assert result.exit_code == 0, f"{recipe.name}: {result.output}"
        recipes[recipe.name] = json.loads(result.output)
    by_key = {
        name: {r["model_key"]: r for r in rows} for name, rows in recipes.items() if name != "share_correct"
    }
    for key, row in board.items():
        score = by_key["official_score"][key]
        assert (score["official_score"], score["official_total"]) == (
            row["official_score"],
            row["official_total"],
        )
        assert score["official_accuracy"] == pytest.approx(row["official_accuracy"])
        assert score["technical_score"] == row["technical_score"]
        interval = by_key["accuracy_interval"][key]
        assert interval["accuracy_ci_low"] == pytest.approx(row["accuracy_ci_low"])
        assert interval["accuracy_ci_high"] == pytest.approx(row["accuracy_ci_high"])
        assert by_key["editions_passed"][key]["editions_passed"] == row["editions_passed"]
        assert by_key["p50_latency"][key]["p50_latency_ms"] == pytest.approx(row["p50_latency_ms"])
        assert by_key["strict_compliance"][key]["strict_compliance"] == pytest.approx(
            row["strict_compliance"]
        )
        cost = by_key["effective_cost"][key]
        assert cost["cost_source"] == row["cost_source"]
        assert cost["effective_cost_usd"] == pytest.approx(row["effective_cost_usd"])
    items = {
        r["qid"]: r
        for r in json.loads(
            published.env.cli("sql", "select * from item_analysis", "--format", "json").output
        )
    }
    for share in recipes["share_correct"]:
        expected = items[share["qid"]]["share_correct"]
        assert share["share_correct"] == (pytest.approx(expected) if expected is not None else None), share

    site = {
        r.attrs["data-model-key"]: r.cells
        for r in tables((built_site / "index.html").read_text())["leaderboard"]
    }
    report_rows = tables(
        (published.env.settings.warehouse_path.parent / "reports" / "leaderboard.html").read_text()
    )[None]
    report = {cells[2]: cells for cells in (r.cells for r in report_rows)}
    terminal = published.env.cli("leaderboard").output.splitlines()
    assert set(site) == set(report) == set(board)
    for key, row in board.items():
        cells = site[key]
        assert cells[3] == f"{row['official_score']}/{row['official_total']}"
        assert cells[4] == words.pct(row["official_accuracy"])
        assert cells[8] == words.cost(row["effective_cost_usd"], row["cost_source"])
        assert cells[9] == words.ms(row["p50_latency_ms"])
        official = report[key][3]  # "85.0% [79.9–89.0]"
        assert official.startswith(f"{100 * row['official_accuracy']:.1f}%")
        assert f"[{100 * row['accuracy_ci_low']:.1f}–{100 * row['accuracy_ci_high']:.1f}]" in official
        # The cost: one set of digits in every view, marked when estimated (`~`, the report's `(est.)`).
        terminal_cost = cost_text(row["effective_cost_usd"], row["cost_source"]).strip()
        if row["effective_cost_usd"] is not None:
            digits = short_decimal(row["effective_cost_usd"])
            estimated = row["cost_source"] == "estimated"
            assert report[key][7] == f"${digits}" + (" (est.)" if estimated else "")
            assert (
                cells[8].removeprefix("US$ ").replace(",", ".") == terminal_cost == digits + "~" * estimated
            )
        else:
            assert report[key][7] == "–" and cells[8] == terminal_cost == "—"
        # The median latency: the terminal's digits (10036.5), thousands grouped on the page and the report.
        if row["p50_latency_ms"] is not None:
            digits = render_cell(float(row["p50_latency_ms"]))
            assert report[key][8] == f"{grouped(row['p50_latency_ms'])} ms"
            assert cells[9] == f"{grouped(row['p50_latency_ms'], '.', ',')} ms"
            assert (
                report[key][8].replace(",", "")
                == cells[9].replace(".", "").replace(",", ".")
                == f"{digits} ms"
            )
            assert f" {digits}" in next(line for line in terminal if f" {key}" in line)
        line = next(line for line in terminal if f" {key}" in line)
        assert f"{row['official_score']}/{row['official_total']}" in line
        assert terminal_cost in line
        assert (
            f"{row['official_accuracy']:.3f} [{row['accuracy_ci_low']:.3f}–{row['accuracy_ci_high']:.3f}]"
            in line
        )


# --- the UI through its GraphQL API (no Chromium needed) -------------------------------------------------
# Last in the file: it adds an edition to the instance, which the partition counts above would see.

UI_EDITION = "25"  # an archived edition the imported warehouse does not hold
UI_INGEST_ASSETS = ("exam_pdfs", "answer_keys", "questions")


def test_ui_shows_the_asset_graph_and_ingests_an_edition(
    published: Published, webserver: DagsterWebserver
) -> None:
    """What a person does in the UI, through the same GraphQL calls: the asset graph (groups, descriptions,
    column schemas), "Add partition" for the 25th edition in the launch dialog, "Materialize" of
    `exam_pdfs`, `answer_keys` and `questions` for it; the run is started by the webserver's run launcher in
    its own process, reads the official PDFs from the loopback mirror and writes the warehouse."""
    server, warehouse_path = webserver, published.env.settings.warehouse_path
    # The asset graph, as the lineage page draws it.
    nodes = {"/".join(n["assetKey"]["path"]): n for n in server.query(ASSET_GRAPH_QUERY)["assetNodes"]}
    assert {key: nodes[key]["groupName"] for key in EXPECTED_GROUPS if key in nodes} == EXPECTED_GROUPS
    assert {n["groupName"] for n in nodes.values()} == set(EXPECTED_GROUPS.values())
    undocumented = [key for key, n in nodes.items() if not (n["description"] or "").strip()]
    assert not undocumented, f"assets without a description in the UI: {undocumented}"
    assert ["exam_pdfs"] in [d["path"] for d in nodes["questions"]["dependencyKeys"]]
    assert nodes["questions"]["isPartitioned"]
    dimensions = nodes["questions"]["partitionDefinition"]["dimensionTypes"]
    assert [d["dynamicPartitionsDefinitionName"] for d in dimensions] == ["editions"]
    assert {"qid", "stem", "choice_a", "status", "area"} <= set(column_schema(nodes["questions"]))
    assert {"rank", "model_key", "official_accuracy"} <= set(column_schema(nodes["leaderboard"]))
    assert {"model_a", "model_b", "p_holm"} <= set(column_schema(nodes["pairwise_comparison"]))
    assert "McNemar" in nodes["pairwise_comparison"]["description"]
    report_deps = {"/".join(d["path"]) for d in nodes["leaderboard_report"]["dependencyKeys"]}
    assert report_deps == set(ANALYSIS_TABLES)  # the lineage draws every table feeding the report
    for key, node in nodes.items():
        schema = column_schema(node)
        assert schema and all(schema.values()), f"{key}: columns without a description in the UI: {schema}"

    # "Add partition" in the launch dialog, then "Materialize" for exam_pdfs, answer_keys, questions.
    added = server.query(
        ADD_PARTITION, {"repo": server.repository_selector(), "name": "editions", "key": UI_EDITION}
    )
    assert added["addDynamicPartition"]["__typename"] == "AddDynamicPartitionSuccess", added
    selector = {
        **server.repository_selector(),
        "jobName": "__ASSET_JOB",
        "assetSelection": [{"path": [key]} for key in UI_INGEST_ASSETS],
    }
    params = {
        "selector": selector,
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": UI_EDITION}]},
        # One worker process instead of one per step: the machine running the suite has two cores.
        "runConfigData": {"execution": {"config": {"in_process": {}}}},
    }
    launched = server.query(LAUNCH_RUN, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]

    status = wait_for_run(server, run_id, timeout_s=300)
    assert status == "SUCCESS", f"run {run_id} ended {status}:\n{failure_text(server, run_id)}"

    # The UI now shows the 25th edition materialized for each asset ...
    for key in UI_INGEST_ASSETS:
        node = server.query(PARTITION_STATUS, {"key": {"path": [key]}})["assetNodeOrError"]
        assert UI_EDITION in node["partitionKeys"]
        assert UI_EDITION in node["assetPartitionStatuses"]["materializedPartitions"], key
    # ... and the warehouse holds the 80 questions the run parsed from the archived official booklet.
    questions = Warehouse(warehouse_path).read("questions", UI_EDITION)
    assert questions.height == 80
    assert sorted(questions["number"].to_list()) == list(range(1, 81))
    assert set(questions["edition"].to_list()) == {int(UI_EDITION)}
    assert Warehouse(warehouse_path).read("answer_keys", UI_EDITION).height == 80

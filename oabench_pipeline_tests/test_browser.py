"""What a person sees in a browser: the Dagster UI and the HTML report, in headless Chromium.

A warehouse with the three editions and the published OABench runs imported (`oabench import`, so the
leaderboard, the report and the aborted GPT-5 Mini run are all there) is served by a real
`dagster-webserver` on 127.0.0.1; Chromium (Debian's `chromium`, driven over the DevTools protocol)
loads the asset graph, the `inferences` asset's Checks tab, an analysis table's asset page
(`pairwise_comparison`: description, columns, its own checks), `leaderboard_report`'s latest
materialization (its inline summary, and a chart opened from "[Show Markdown]"), then the HTML report
file, and the test asserts on what the pages render. Without Chromium the test is skipped, except in CI
(`CI=true`), where `.ci/run` installs it and its absence is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from oabench_pipeline_tests.pipeline_env import PipelineEnv, copy_ingested, make_env
from oabench_pipeline_tests.servers.chromium import Browser, find_chromium, images
from oabench_pipeline_tests.servers.dagster_webserver import DagsterWebserver, write_instance_yaml
from oabench_pipeline_tests.servers.static_files import StaticFileServer

pytestmark = pytest.mark.timeout(600)

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
        import websockets.sync.client  # noqa: F401
    except ImportError:
        pytest.fail("the websockets package is missing: pip install -e '.[dev]'")
    return chromium


@dataclass
class Site:
    env: PipelineEnv
    server: DagsterWebserver
    chromium: str
    profile: Path


@pytest.fixture(scope="module")
def site(
    tmp_path_factory: pytest.TempPathFactory,
    ingested_template: Path,
    mirror_server: StaticFileServer,
    shared_oab: Path,
) -> Iterator[Site]:
    chromium = chromium_or_skip()
    root = tmp_path_factory.mktemp("browser")
    with pytest.MonkeyPatch.context() as monkeypatch:
        env = make_env(root, monkeypatch, mirror_server.base_url)
        monkeypatch.setenv("OABENCH_PORTAL_URL", mirror_server.base_url)  # no sensor reaches the real portal
        write_instance_yaml(
            root / "dagster_home"
        )  # the UI's instance settings, before the CLI writes its own
        copy_ingested(ingested_template, env.settings.warehouse_path.parent)
        result = env.cli("import", str(shared_oab / "published-runs"))
        assert result.exit_code == 0, result.output
        server_env = {
            "OABENCH_WAREHOUSE": str(env.settings.warehouse_path),
            "OABENCH_SOURCE_BASE_URL": mirror_server.base_url,
            "OABENCH_PORTAL_URL": mirror_server.base_url,
        }
        with DagsterWebserver(root / "dagster_home", server_env) as server:
            yield Site(env, server, chromium, root / "chromium-profile")


@pytest.fixture(scope="module")
def browser(site: Site) -> Iterator[Browser]:
    """One Chromium for the file (a launch per test was most of each test's time): every test starts by
    navigating, so none sees another's page."""
    with Browser(site.chromium, site.profile) as page:
        yield page


def test_asset_graph_shows_every_group_and_asset(site: Site, browser: Browser) -> None:
    browser.goto(site.server.url + GRAPH_PATH)
    browser.wait_for_text(
        "editions", "exam_pdfs", "answer_keys", "questions", "inferences", "scores", "leaderboard_report",
        "published_runs",
    )  # fmt: skip
    # The collapsed `analysis` group is drawn as a box in the graph, besides its entry in the side list.
    assert browser.count_text("analysis") >= 2


def test_checks_tab_shows_descriptions_and_the_failed_check(site: Site, browser: Browser) -> None:
    """The aborted run's blocking check is recorded as failed; every check says what it checks."""
    browser.goto(site.server.url + "/assets/inferences?view=checks")
    page = browser.wait_for_text(
        "every_active_question_has_a_row", "one_row_per_question", "error_rate_at_most_2_percent"
    )
    assert "No description provided" not in page
    browser.click_text("every_active_question_has_a_row")
    browser.wait_for_text("Each active question of the edition has an answer", "Failed")


def test_an_analysis_table_has_its_own_asset_page(site: Site, browser: Browser) -> None:
    """`pairwise_comparison` is an asset: its description, its columns and its own passed checks."""
    browser.goto(site.server.url + "/assets/pairwise_comparison")
    browser.wait_for_text("pairwise_comparison", "McNemar", "p_holm", "a_only_correct", "Holm's correction")
    browser.goto(site.server.url + "/assets/pairwise_comparison?view=checks")
    page = browser.wait_for_text("one_row_per_pair", "p_values_valid", "Passed")
    assert "No description provided" not in page
    assert "edition_sums_equal_aggregate" not in page  # the leaderboard's checks stay on its own page


def test_report_materialization_shows_summary_inline_and_charts(site: Site, browser: Browser) -> None:
    browser.goto(site.server.url + "/assets/leaderboard_report?view=events")
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


def test_html_report_renders_its_charts(site: Site, browser: Browser) -> None:
    report = site.env.settings.warehouse_path.parent / "reports" / "leaderboard.html"
    browser.goto(report.as_uri())
    page = browser.wait_for_text("OABench leaderboard", "Data as of", "Per edition", "Rank (range)")
    assert "0/1 run (45) of 3" in page  # the aborted GPT-5 Mini run says what it covered
    drawn = images(browser)
    assert len(drawn) == 3  # cost vs accuracy, accuracy by area, accuracy by exam date (cutoffs)
    for image in drawn:
        assert image["loaded"] and image["width"] > 500, image
        assert image["inView"], f"chart wider than the page: {image}"  # the heatmap is seen whole


def test_partition_view_shows_the_aborted_cell_as_failed(site: Site, browser: Browser) -> None:
    """The cell `oabench status` calls failed is not green "Materialized" in the partition view."""
    browser.goto(site.server.url + "/assets/inferences?view=partitions")
    # 13 imported cells: 12 complete, the aborted GPT-5 Mini one failed; GPT-5 Mini never ran 43 and 44.
    browser.wait_for_text("openai/gpt-5-mini", "Failed (1)", "Materialized (12)", "Missing (2)")

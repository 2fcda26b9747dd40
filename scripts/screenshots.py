"""Screenshots of the Dagster UI and of the static site for the docs, from the machinery of the browser test.

    .venv/bin/python scripts/screenshots.py [--out docs/images] [--work DIR] [--skip-prepare] [--site-only]

Prepares a warehouse and a Dagster instance in `--work` (a temporary folder by default) the way a person
does, with the `oabench` CLI: ingest the 33 editions from the mirror beside the repo
(`../shared/oab/mirror`), run the two offline baselines, import the published OABench runs (so the
leaderboard has real rows, and the aborted GPT-5 Mini run shows as a missing cell), build the site
(`oabench site`). Then it starts `dagster-webserver` on 127.0.0.1 for that instance and has headless
Chromium (Debian: `apt-get install chromium`), driven by Playwright as in
`oabench_pipeline_tests/test_browser.py`, save PNGs of the UI's pages and of each kind of site page
(opened from `file://`) into `--out`, reduced to 256 colours so they stay small. Nothing is sent off the
machine: no API key is needed and the webserver's telemetry is off.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from oabench_pipeline_tests.servers.chromium import Browser, find_chromium  # noqa: E402
from oabench_pipeline_tests.servers.dagster_webserver import (  # noqa: E402
    DagsterWebserver,
    write_instance_yaml,
)

SHARED = Path(os.environ.get("OABENCH_SHARED_DIR", REPO_ROOT.parent / "shared")) / "oab"
OABENCH = Path(sys.executable).with_name("oabench")
BASELINES = "baseline/random,baseline/longest-choice"
GROUPS = ("sources", "exams", "inference", "scoring", "reports")

# (file name, page path, texts to wait for, text to click first or None)
PAGES = (
    # The global lineage with every group expanded (the UI's `expanded` query parameter) but `analysis`:
    # its twelve sibling tables make a column taller than the page fits; collapsed, it is one box.
    (
        "asset-graph.png",
        "/asset-groups?expanded=" + ",".join(f"global@global:{g}" for g in GROUPS),
        ("leaderboard_report", "inferences", "exam_pdfs"),
        None,
    ),
    # An analysis table is an asset of its own: its description, columns, checks, automation.
    ("analysis-table.png", "/assets/pairwise_comparison", ("McNemar", "p_holm"), None),
    # The latest materialization of the report: the summary drawn inline, the rest behind dialogs.
    ("leaderboard-report.png", "/assets/leaderboard_report?view=events", ("Data as of", "summary"), None),
    # One of its charts, opened from "[Show Markdown]" (the second one: cost vs accuracy).
    ("leaderboard-chart.png", "/assets/leaderboard_report?view=events", ("cost_vs_accuracy",), 1),
    # The cells of `inferences`: the aborted GPT-5 Mini run is a missing cell (not failed, not
    # materialized), as `oabench status` says.
    ("inferences-partitions.png", "/assets/inferences?view=partitions", ("Missing (",), None),
)

# (file name, page of the site, text to wait for): one of each kind of page.
SITE_PAGES = (
    ("site-inicio.png", "index.html", "Classificação"),
    ("site-modelo.png", "modelo/x-ai--grok-4.1-fast.html", "Questões erradas"),
    ("site-questao.png", "questao/oab-44-1f-q63.html", "Respostas dos modelos"),
    ("site-edicao.png", "edicao/44.html", "Arquivos oficiais"),
    ("site-metodologia.png", "metodologia.html", "Protocolos"),
    ("site-dados.png", "dados.html", "Tabelas do armazém"),
)
SITE_VIEWPORT = (1200, 820)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "images", help="where the PNGs go")
    parser.add_argument(
        "--work", type=Path, help="warehouse + DAGSTER_HOME folder (default: a temporary one)"
    )
    parser.add_argument("--skip-prepare", action="store_true", help="reuse the warehouse already in --work")
    parser.add_argument(
        "--site-only", action="store_true", help="only the site's pages, not the Dagster UI's"
    )
    args = parser.parse_args()

    chromium = find_chromium()
    if chromium is None:
        print(
            "no Chromium found: apt-get install chromium (Debian/Ubuntu), then run this again",
            file=sys.stderr,
        )
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="oabench-screens-"))
    env = {
        "OABENCH_WAREHOUSE": str(work / "warehouse" / "oabench.duckdb"),
        "DAGSTER_HOME": str(work / "dagster_home"),
        "OABENCH_SOURCE_BASE_URL": str(SHARED / "mirror"),
        "OABENCH_LOG_LEVEL": "ERROR",
    }
    if not args.skip_prepare:
        write_instance_yaml(work / "dagster_home")  # before the CLI writes its own
        prepare(env)
    args.out.mkdir(parents=True, exist_ok=True)
    site = work / "warehouse" / "site"
    with Browser(chromium, *SITE_VIEWPORT) as browser:
        for name, page, text in SITE_PAGES:
            browser.goto((site / page).as_uri())
            browser.wait_for_text(text)
            save(browser, args.out / name)
    if args.site_only:
        return 0
    with DagsterWebserver(work / "dagster_home", env) as server:
        print(f"webserver: {server.url} (log: {server.log_path})")
        for name, path, texts, click in PAGES:
            with Browser(chromium) as browser:
                browser.goto(server.url + path)
                browser.wait_for_text(*texts)
                if click is not None:
                    browser.click_text("[Show Markdown]", click)
                time.sleep(3)  # fonts, the graph layout, a dialog's images
                save(browser, args.out / name)
    return 0


def save(browser: Browser, target: Path) -> None:
    """The page as a PNG of at most 256 colours (Pillow, which matplotlib brings): a fraction of the size."""
    from PIL import Image

    browser.screenshot(target)
    with Image.open(target) as image:
        image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(target, optimize=True)
    print(f"{target}: {target.stat().st_size // 1024} KB")


def prepare(env: dict[str, str]) -> None:
    """Ingest, run the baselines and import the published runs with the `oabench` CLI."""
    steps = [
        ["ingest"],
        ["run", "--models", BASELINES, "--suite", "all"],  # every edition, as the README does
        ["import", str(SHARED / "published-runs")],
        ["site"],
    ]
    for step in steps:
        print("$ oabench " + " ".join(step), flush=True)
        subprocess.run([str(OABENCH), *step], cwd=REPO_ROOT, env={**os.environ, **env}, check=True)


if __name__ == "__main__":
    sys.exit(main())

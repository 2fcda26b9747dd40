"""Hostile model labels through the real commands: a spreadsheet formula, terminal escapes, HTML and
characters that reorder or hide text, in a registry's labels, out through `oabench leaderboard`,
`oabench sql`, the Markdown report, and the site's pages and downloads.

The two baselines answer edition 45 only (two cells): a label reaches every output whether its key is
ranked or not, so the other editions' cells would add runs and no case."""

from __future__ import annotations

import csv
from pathlib import Path

from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file

FORMULA = '=HYPERLINK("http://evil.example/x","click")'
ESCAPES = "Evil\x1b]0;pwned\x07\x1b[31m <script>alert(1)</script> fdp.\u202eexe\u200b"
INVISIBLE = ("\x1b", "\x07", "\u202e", "\u200b")


def test_hostile_labels_reach_no_terminal_spreadsheet_report_or_page(fresh_env: PipelineEnv) -> None:
    env = fresh_env
    entries = [
        {"id": "baseline/random", "kind": "baseline", "label": FORMULA},
        {"id": "baseline/longest-choice", "kind": "baseline", "label": ESCAPES},
    ]
    env.set("OABENCH_MODELS_FILE", write_models_file(env.root / "models.toml", entries))
    run = env.cli("run", "--models", "baseline/random,baseline/longest-choice", "--editions", "45")
    assert run.exit_code == 0, run.output

    table = env.cli("leaderboard")
    assert table.exit_code == 0, table.output
    assert not any(c in table.output for c in INVISIBLE), repr(table.output)
    sql = env.cli("sql", "select label from models order by label")
    assert sql.exit_code == 0 and not any(c in sql.output for c in INVISIBLE), repr(sql.output)
    exported = env.cli("leaderboard", "--format", "csv")
    labels = [row["label"] for row in csv.DictReader(exported.output.splitlines())]
    assert "'" + FORMULA in labels and FORMULA not in labels

    warehouse_dir = env.settings.warehouse_path.parent
    report = (warehouse_dir / "reports" / "leaderboard.md").read_text(encoding="utf-8")
    assert "&lt;script&gt;" in report and "<script>" not in report

    site = env.cli("site")
    assert site.exit_code == 0, site.output
    site_dir = warehouse_dir / "site"
    for name in ("models.csv", "leaderboard.csv"):
        with (site_dir / "dados" / name).open(encoding="utf-8") as handle:
            cells = [cell for row in csv.reader(handle) for cell in row]
        assert "'" + FORMULA in cells and FORMULA not in cells, name
    pages = [p.read_text(encoding="utf-8") for p in Path(site_dir).rglob("*.html")]
    assert pages and not any(c in page for page in pages for c in INVISIBLE)

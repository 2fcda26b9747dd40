"""Hostile model labels through the real commands: a spreadsheet formula, terminal escapes, HTML and
characters that reorder or hide text, in a registry's labels, out through `oabench leaderboard`,
`oabench sql`, the Markdown report, and the site's pages and downloads.

The two baselines answer edition 45 only (two cells): a label reaches every output whether its key is
ranked or not, so the other editions' cells would add runs and no case. The cells, the `models` table and
the report are built by the steps `oabench run` takes, as in-process runs (`answer_and_report`): the labels
go through the same assets, and no launched run's process or code server is needed to reach them."""

from __future__ import annotations

import csv
from pathlib import Path

from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file

FORMULA = '=HYPERLINK("http://evil.example/x","click")'
ESCAPES = "Evil\x1b]0;pwned\x07\x1b[31m <script>alert(1)</script> fdp.\u202eexe\u200b"
INVISIBLE = ("\x1b", "\x07", "\u202e", "\u200b")


def answer_and_report(env: PipelineEnv, model_keys: list[str], edition: str) -> None:
    """`oabench run --models KEYS --editions EDITION`'s steps, each an in-process run: the `models` table,
    each cell's answers and scores, then the analysis tables and the report."""
    from oabench_pipeline.cli.common import REPORT_ASSETS
    from oabench_pipeline.definitions import build_definitions
    from oabench_pipeline.engine.runs import ensure_partitions, instance_for, run_assets
    from oabench_pipeline.shared.partitions import cell_partition_key

    settings = env.settings
    with instance_for(settings) as instance:
        defs = build_definitions(settings)
        ensure_partitions(instance, "editions", [edition])
        ensure_partitions(instance, "model_keys", model_keys)
        steps: list[tuple[list[str], str | None]] = [(["models"], None)]
        steps += [(["inferences", "scores"], str(cell_partition_key(key, edition))) for key in model_keys]
        for selection, partition in [*steps, (REPORT_ASSETS, None)]:
            outcome = run_assets(defs, instance, selection, partition_key=partition)
            assert outcome.success, (selection, partition, outcome.errors)


def test_hostile_labels_reach_no_terminal_spreadsheet_report_or_page(fresh_env: PipelineEnv) -> None:
    env = fresh_env
    entries = [
        {"id": "baseline/random", "kind": "baseline", "label": FORMULA},
        {"id": "baseline/longest-choice", "kind": "baseline", "label": ESCAPES},
    ]
    env.set("OABENCH_MODELS_FILE", write_models_file(env.root / "models.toml", entries))
    answer_and_report(env, [entry["id"] for entry in entries], "45")

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

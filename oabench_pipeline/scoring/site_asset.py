"""`leaderboard_site`: the static site, rebuilt from the warehouse tables (pages in `core/site/`)."""

import time
from pathlib import Path

from dagster import AssetExecutionContext, Config, Failure, MaterializeResult, MetadataValue, asset

from oabench_pipeline.automation.downstream import SITE_CONDITION
from oabench_pipeline.core.site import SITE_VERSION, SiteOptions, build_site
from oabench_pipeline.core.site.labels import LANGS
from oabench_pipeline.core.site.paths import INDEX
from oabench_pipeline.metadata import table_schema
from oabench_pipeline.resources import WarehouseResource
from oabench_pipeline.scoring.inputs import healthy_reader
from oabench_pipeline.tables import ANALYSIS_TABLES

SITE_FOLDER = "site"  # under the warehouse folder: warehouse/site/


class SiteConfig(Config):
    """Where the site goes and in which language (`oabench site --out DIR --lang en`)."""

    out_dir: str | None = None
    """Folder to write; default: `site/` beside the warehouse file (warehouse/site/)."""
    lang: str = "pt"
    """`pt` (default) or `en`: the language of the labels."""
    suite: str | None = None
    """The suite ranked on index.html (default: the default suite, the study's); the others get
    `suite/<name>.html`, all linked from a switcher."""


def site_folder(warehouse_root: Path, out_dir: str | None) -> Path:
    return Path(out_dir).resolve() if out_dir else warehouse_root / SITE_FOLDER


@asset(
    group_name="reports",
    deps=list(ANALYSIS_TABLES),
    code_version=SITE_VERSION,
    automation_condition=SITE_CONDITION,
    kinds={"html"},
    metadata={"dagster/column_schema": table_schema("leaderboard").value},  # Início; dados/leaderboard.csv
)
def leaderboard_site(
    context: AssetExecutionContext, config: SiteConfig, warehouse: WarehouseResource
) -> MaterializeResult:
    """The public static site in `warehouse/site/`: plain files with relative links, for `file://`, any HTTP
    server or GitHub Pages (no server code, nothing fetched from elsewhere).

    Início (the ranked leaderboard with intervals, tie groups, cost and latency, the cost-vs-accuracy
    frontier), one page per model key, per edition and per question (every model's answer, escaped),
    Metodologia, and Dados (every warehouse table as CSV and Parquet, and the SQL behind each figure).
    A file is rewritten only when its bytes change, so a rebuild after one new cell touches only the
    pages that cell changes; `written` and `unchanged` say how many. It reads the cells the analysis
    tables are built from (`scoring/inputs.py`): a damaged cell is left out of the pages as of the tables.
    """
    if config.lang not in LANGS:
        raise Failure(description=f"lang {config.lang!r}: expected one of {', '.join(LANGS)}")
    store = warehouse.warehouse()
    if not store.has_table("leaderboard") or store.read("leaderboard").is_empty():
        raise Failure(description="the leaderboard is empty: run `oabench run` or `oabench import` first")
    folder = site_folder(store.root, config.out_dir)
    started = time.perf_counter()
    with healthy_reader(store) as (con, inputs):
        for line in inputs.lines():
            context.log.warning(line)
        options = SiteOptions(lang="en" if config.lang == "en" else "pt", suite=config.suite)
        try:
            result = build_site(con, folder, store.tables(), options)
        except ValueError as error:  # an unknown suite: nothing written
            raise Failure(description=str(error)) from error
    seconds = time.perf_counter() - started
    return MaterializeResult(
        metadata={
            "index": MetadataValue.path(str(folder / INDEX)),
            "folder": MetadataValue.path(str(folder)),
            "pages": result.pages,
            "files": result.files,
            "written": len(result.written),
            "unchanged": result.unchanged,
            "removed": len(result.removed),
            "bytes": result.total_bytes,
            "build_seconds": round(seconds, 2),
            "lang": config.lang,
            "suite": config.suite or "default",
        }
    )

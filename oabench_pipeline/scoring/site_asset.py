"""`leaderboard_site`: the static site, rebuilt from the warehouse tables (pages in `core/site/`)."""

import time
from pathlib import Path

from dagster import AssetExecutionContext, Config, Failure, MaterializeResult, MetadataValue, asset

from oabench_pipeline.core.tables import ANALYSIS_TABLES
from oabench_pipeline.core.versions import SITE_VERSION
from oabench_pipeline.inference.cell import cell_name
from oabench_pipeline.scoring.conditions import SITE_CONDITION
from oabench_pipeline.scoring.inputs import CELL_TABLES, analysis_inputs
from oabench_pipeline.shared.metadata import table_schema
from oabench_pipeline.shared.resources import WarehouseResource
from oabench_pipeline.warehouse import Warehouse

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


def counted_cells(store: Warehouse) -> set[str]:
    """The cells (partition keys) the stored leaderboard counts: its per-edition rows."""
    if not store.has_table("leaderboard_by_edition"):
        return set()
    rows = store.read("leaderboard_by_edition").select("model_key", "edition").iter_rows()
    return {cell_name(key, edition) for key, edition in rows}


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
    pages that cell changes; `written` and `unchanged` say how many. Every count on a page comes from the
    stored analysis tables, so the site reads every readable cell file: a cell with an unreadable file
    that those tables count is refused (nothing written, the folder left as it was; the failure names the
    file and the command that rebuilds it), one they do not count is left out, and `left_out` says so
    (`oabench site` prints it). Two builds into one folder take turns (`core/site/writer.py`).
    """
    # The site's builder (numpy, jinja2, the charts) is imported here, not with the definitions: every
    # run's process loads those, cell runs included.
    from oabench_pipeline.core.site import SiteOptions, build_site
    from oabench_pipeline.core.site.labels import LANGS
    from oabench_pipeline.core.site.paths import INDEX

    if config.lang not in LANGS:
        raise Failure(description=f"lang {config.lang!r}: expected one of {', '.join(LANGS)}")
    store = warehouse.warehouse()
    if not store.has_table("leaderboard") or store.read("leaderboard").is_empty():
        raise Failure(description="the leaderboard is empty: run `oabench run` or `oabench import` first")
    folder = site_folder(store.root, config.out_dir)
    started = time.perf_counter()
    inputs = analysis_inputs(store)
    counted = counted_cells(store)
    refused = [f"cell {key}: {why}" for key, why in inputs.unreadable.items() if key in counted]
    if refused:
        # Its counts are on the leaderboard but its answers, misses and latencies cannot be read: pages
        # built now would contradict one another. The folder keeps the last consistent site.
        raise Failure(
            description=f"site not built ({folder} left as it was): the leaderboard counts "
            f"{len(refused)} cell(s) with an unreadable file: " + " | ".join(refused)
        )
    left_out = [
        f"cell {key}: left out of the site (the leaderboard does not count it): {why}"
        for key, why in inputs.unreadable.items()
    ]
    for line in left_out:
        context.log.warning(line)
    with store.reader(leave_out={table: sorted(inputs.unreadable) for table in CELL_TABLES}) as con:
        options = SiteOptions(lang="en" if config.lang == "en" else "pt", suite=config.suite)
        try:
            result = build_site(con, folder, store.tables(), options, waiting=context.log.info)
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
            "left_out": MetadataValue.text("\n".join(left_out)),
        }
    )

"""`oabench site`: the static site (`leaderboard_site`), materialized like any asset, then where it is."""

from __future__ import annotations

from pathlib import Path

import click

from oabench_pipeline.cli.common import _dagster, _must, run_assets
from oabench_pipeline.cli.group import main
from oabench_pipeline.settings import Settings
from oabench_pipeline.warehouse import Warehouse

SITE_ASSET = "leaderboard_site"


@main.command(name="site")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder to write (default: warehouse/site/ beside the warehouse).",
)
@click.option(
    "--lang", type=click.Choice(["pt", "en"]), default="pt", show_default=True, help="Language of the labels."
)
@click.option(
    "--suite",
    metavar="NAME",
    help="Suite ranked on index.html (default: oabench-2026, the study's); every other suite gets "
    "suite/<name>.html, all linked from a switcher.",
)
def site_cmd(out_dir: Path | None, lang: str, suite: str | None) -> None:
    """Write the static site from the warehouse tables: a page per model key, edition and question.

    Plain files with relative links: open index.html from the folder, serve it with
    `python -m http.server -d DIR`, or publish the folder as is (GitHub Pages). Only files whose bytes
    changed are rewritten.
    """
    settings = Settings.from_env()
    warehouse = Warehouse(settings.warehouse_path)
    if not warehouse.has_table("leaderboard"):
        raise click.ClickException("no leaderboard yet: run `oabench run` or `oabench import` first")
    if suite is not None and warehouse.has_table("suites"):
        known = warehouse.read("suites")["suite"].to_list()
        if suite not in known:
            raise click.ClickException(f"no suite {suite!r}: the suites are {', '.join(known)}")
    from dagster import AssetKey

    defs, instance = _dagster(settings)
    config = {"lang": lang, "out_dir": str(out_dir.resolve()) if out_dir else None, "suite": suite}
    _must(
        run_assets(defs, instance, [SITE_ASSET], run_config={"ops": {SITE_ASSET: {"config": config}}}), "site"
    )
    event = instance.get_latest_materialization_event(AssetKey(SITE_ASSET))
    materialization = event.asset_materialization if event is not None else None
    if materialization is None:  # the run succeeded, so Dagster recorded it
        raise click.ClickException("site: built, but its materialization is not in the instance")
    meta = {key: value.value for key, value in materialization.metadata.items()}
    folder = Path(str(meta["folder"]))
    for line in str(meta.get("left_out") or "").splitlines():  # an unreadable cell the leaderboard omits
        click.echo(f"warning: {line}", err=True)
    click.echo(
        f"site: {meta['pages']} pages, {meta['files']} files ({meta['written']} written, {meta['unchanged']} "
        f"unchanged, {meta['removed']} removed), {float(str(meta['bytes'])) / 1e6:.1f} MB in {meta['build_seconds']} s"
    )
    click.echo(f"open {folder / 'index.html'} (or serve it: python -m http.server -d {folder})")

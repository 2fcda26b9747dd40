"""What the site publishes, on a real scored warehouse with a partition per cell (as `oabench run` leaves
one): endpoints reduced to their public identity, no page from an unreadable cell the leaderboard counts,
and builds of one folder taking turns (issue 35, items 1, 2 and 6)."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import threading
import time
from multiprocessing.synchronize import Barrier
from pathlib import Path

import polars as pl
import pytest

from oabench_pipeline.core.editions import Suite
from oabench_pipeline.core.leaderboard import build_leaderboard_tables
from oabench_pipeline.core.public_endpoints import public_endpoint
from oabench_pipeline.core.scoring import score_inferences
from oabench_pipeline.core.site import SiteOptions, build_site, paths
from oabench_pipeline.core.site.writer import LOCK, MANIFEST
from oabench_pipeline.inference.cell import cell_name
from oabench_pipeline.scoring.inputs import healthy_reader
from oabench_pipeline.warehouse import Warehouse, views_refreshed_once
from oabench_pipeline_tests.core.synthetic_results import (
    make_synthetic_warehouse,
    rebuild_tables,
    stored_suites,
)
from oabench_pipeline_tests.pipeline_env import PipelineEnv, make_env, write_models_file
from oabench_pipeline_tests.site_pages import broken_links, tables

SECRET = "SUPERSECRET123"
LOOPBACK_URL = f"http://127.0.0.1:18901/ok/v1?code={SECRET}"  # what the probe found in the download
PUBLIC_URL = f"https://gw.example.com:8443/team/v1?code={SECRET}"


def write_cell_warehouse(db_path: Path) -> Warehouse:
    """3 keys x 2 editions, `inferences` and `scores` a partition per cell, ranked over two suites; the
    first key's endpoint on loopback with a key in its query string, the second's a public host's."""
    synthetic = make_synthetic_warehouse(n_models=3, n_editions=2, seed=11, plant_anomalies=False)
    frames = {name: pl.DataFrame(pl.from_arrow(table)) for name, table in synthetic.tables.items()}
    urls = {synthetic.model_keys[0]: LOOPBACK_URL, synthetic.model_keys[1]: PUBLIC_URL}
    frames["models"] = frames["models"].with_columns(
        base_url=pl.col("model_key").replace_strict(urls, default=pl.col("base_url"))
    )
    frames["model_pricing"] = frames["model_pricing"].with_columns(base_url=pl.lit(LOOPBACK_URL))
    store = Warehouse(db_path)
    with views_refreshed_once():
        for name, frame in frames.items():
            if name != "inferences":
                store.write_partition(name, frame)
        _write_cells(store, "inferences", frames["inferences"])
        with store.reader() as con:
            _write_cells(store, "scores", score_inferences(con))
        first, second = sorted(frames["editions"]["edition"].to_list())
        rebuild_tables(
            store,
            [Suite(name="oabench-2026", editions=(first,)), Suite(name="all", editions=(first, second))],
        )
    store.ensure_views()
    return store


def _write_cells(store: Warehouse, table: str, frame: pl.DataFrame) -> None:
    for (edition, key), cell in frame.partition_by("edition", "model_key", as_dict=True).items():
        store.write_partition(table, cell, cell_name(str(key), int(str(edition))))


@pytest.fixture(scope="module")
def warehouse_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("publishing")
    write_cell_warehouse(root / "warehouse" / "oabench.duckdb")
    return root / "warehouse"


@pytest.fixture
def store(warehouse_template: Path, tmp_path: Path) -> Warehouse:
    shutil.copytree(warehouse_template, tmp_path / "warehouse")
    store = Warehouse(tmp_path / "warehouse" / "oabench.duckdb")
    store.ensure_views()  # the copy's catalogue names the template's folder
    return store


def build(store: Warehouse, out: Path, lang: str = "pt", suite: str | None = None) -> None:
    with store.reader() as con:
        build_site(con, out, store.tables(), SiteOptions(lang="en" if lang == "en" else "pt", suite=suite))


# --- item 1: endpoints ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "published"),
    [
        (LOOPBACK_URL, None),
        (PUBLIC_URL, "https://gw.example.com"),
        ("https://openrouter.ai/api/v1", "https://openrouter.ai"),
        (
            "https://NAME.openai.azure.com/openai/deployments/gpt-4o?api-version=2024-10-21",
            "https://name.openai.azure.com",
        ),
        ("http://user:pw@api.example.com/v1#x", "http://api.example.com"),
        ("http://8.8.8.8/v1", "http://8.8.8.8"),
        ("http://[2001:4860:4860::8888]:8000/v1", "http://[2001:4860:4860::8888]"),
        ("http://[::1]:11434/v1", None),
        ("http://192.168.0.7:8000/v1", None),
        ("http://10.1.2.3/v1", None),
        ("http://100.64.0.1/v1", None),  # carrier-grade NAT, shared
        ("http://169.254.169.254/latest", None),
        ("http://2852039166/", None),  # 169.254.169.254 spelled as one number
        ("http://0x7f000001/", None),  # 127.0.0.1 in hex
        ("http://[::ffff:7f00:1]/", None),  # 127.0.0.1, IPv4-mapped
        ("http://168.63.129.16/", None),  # Azure's WireServer: global, still a metadata service
        ("http://localhost:8000/v1", None),
        ("http://ollama:11434/v1", None),  # a single-label (Docker, LAN) name
        ("http://gpu.local/v1", None),
        ("http://metadata.google.internal/", None),
        ("http://vllm.home.arpa/v1", None),
        ("ftp://example.com/", None),
        ("not a url", None),
        ("http://[::1", None),
        (None, None),
    ],
)
def test_an_endpoint_is_published_as_the_scheme_and_host_of_a_public_host(
    url: str | None, published: str | None
) -> None:
    assert public_endpoint(url) == published


def test_downloads_carry_no_secret_and_no_internal_host(store: Warehouse, tmp_path: Path) -> None:
    site = tmp_path / "site"
    build(store, site)
    for file in site.rglob("*"):
        if file.is_file() and file.suffix != ".parquet":  # Parquet pages are compressed: read below
            text = file.read_bytes()
            assert SECRET.encode() not in text and b"127.0.0.1" not in text, file
    for kind in ("csv", "parquet"):
        path = site / paths.data_file("models", kind)
        models = pl.read_csv(path) if kind == "csv" else pl.read_parquet(path)
        published = dict(models.select("model_key", "base_url").iter_rows())
        assert sorted(published.values(), key=str) == sorted(
            [None, "https://gw.example.com", "https://openrouter.ai"], key=str
        ), kind
        pricing = site / paths.data_file("model_pricing", kind)
        frame = pl.read_csv(pricing) if kind == "csv" else pl.read_parquet(pricing)
        assert frame["base_url"].null_count() == frame.height, kind
    # The warehouse keeps the registry's spelling for the user's own queries (`oabench sql`).
    assert LOOPBACK_URL in store.read("models")["base_url"].to_list()


def test_a_key_pasted_into_base_url_never_reaches_the_warehouse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `models` step writes the registry's `base_url` with the model's environment secrets redacted
    (the key the client sends, also pasted into the URL): the warehouse never holds a key."""
    from dagster import materialize

    from oabench_pipeline.inference.registry_assets import models
    from oabench_pipeline.inference.resources import ModelsRegistryResource
    from oabench_pipeline.shared.resources import WarehouseResource

    key = "sk-acme-0123456789abcdef"
    monkeypatch.setenv("ACME_TEST_KEY", key)
    registry = write_models_file(
        tmp_path / "models.toml",
        [
            {
                "id": "acme/m",
                "base_url": f"https://api.example.com/v1?key={key}&region=eu",
                "api_key_env": "ACME_TEST_KEY",
            },
            {"id": "acme/local", "base_url": LOOPBACK_URL, "api_key_env": ""},
        ],
    )
    db_path = tmp_path / "warehouse" / "oabench.duckdb"
    result = materialize(
        [models],
        resources={
            "models_registry": ModelsRegistryResource(path=str(registry)),
            "warehouse": WarehouseResource(path=str(db_path), raw_dir=str(tmp_path / "raw")),
        },
    )
    assert result.success
    stored = dict(Warehouse(db_path).read("models").select("model_key", "base_url").iter_rows())
    assert stored["acme/m"] == "https://api.example.com/v1?key=***&region=eu"
    assert stored["acme/local"] == LOOPBACK_URL  # no secret of the environment in it: as written


# --- item 6: two builds into one folder ---------------------------------------------------------------------


@pytest.mark.slow
def test_a_build_waits_while_another_holds_the_folder(store: Warehouse, tmp_path: Path) -> None:
    """Deterministic: while another build holds the folder (its lock), a build writes nothing and says
    it waits; then it builds whole, leaving the file a person put there."""
    from oabench_pipeline.core.site.writer import folder_lock

    site = tmp_path / "site"
    site.mkdir()
    (site / "CNAME").write_text("bench.example.org\n")
    told: list[str] = []
    done = threading.Event()
    with folder_lock(site):
        second = threading.Thread(target=lambda: (_build_en(store, site, told), done.set()), name="second")
        second.start()
        deadline = time.monotonic() + 30
        while not told and time.monotonic() < deadline:  # it reads the tables first, then asks for the folder
            time.sleep(0.05)
        time.sleep(0.5)
        assert not done.is_set()
        assert {p.name for p in site.iterdir()} == {"CNAME", LOCK}  # nothing written meanwhile
        assert told == [f"another build is writing {site}: waiting for it to finish"]
    second.join(60)
    assert done.is_set()
    assert 'lang="en"' in (site / "index.html").read_text(encoding="utf-8")
    assert broken_links(site) == []
    assert (site / "CNAME").read_text() == "bench.example.org\n"


def _build_en(store: Warehouse, site: Path, told: list[str]) -> None:
    with store.reader() as con:
        build_site(con, site, store.tables(), SiteOptions(lang="en", suite="all"), waiting=told.append)


TRIES = 3


def _build_in_process(db_path: str, site: str, lang: str, suite: str | None, turns: Barrier) -> None:
    """`TRIES` builds, each started with the other process's (the barrier), the test checking in between."""
    store = Warehouse(Path(db_path))
    for _ in range(TRIES):
        turns.wait()
        build(store, Path(site), lang, suite)
        turns.wait()


@pytest.mark.slow
def test_two_builds_at_once_into_one_folder_leave_one_whole_site(store: Warehouse, tmp_path: Path) -> None:
    """What the probe did three times: two `oabench site` builds (another suite, another language) into
    one folder at once. Each try ends as one build whole: every link resolves, the manifest lists what is
    there, and a file a person put in the folder is still there."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "CNAME").write_text("bench.example.org\n")
    context = multiprocessing.get_context("spawn")
    turns = context.Barrier(3, timeout=120)
    builds = [
        context.Process(target=_build_in_process, args=(str(store.db_path), str(site), "pt", None, turns)),
        context.Process(target=_build_in_process, args=(str(store.db_path), str(site), "en", "all", turns)),
    ]
    for process in builds:
        process.start()
    try:
        for attempt in range(TRIES):
            turns.wait()  # both start
            turns.wait()  # both done
            assert broken_links(site) == [], attempt
            listed = set(json.loads((site / MANIFEST).read_text())["files"])
            present = {str(p.relative_to(site)) for p in site.rglob("*") if p.is_file()}
            assert present - listed == {MANIFEST, LOCK, "CNAME"}, attempt
            assert listed <= present, attempt
            assert tables((site / "index.html").read_text(encoding="utf-8"))["leaderboard"], attempt
    finally:
        for process in builds:
            process.join(120 if process.is_alive() else 0)
            if process.is_alive():
                process.terminate()
    assert [p.exitcode for p in builds] == [0, 0]
    assert (site / "CNAME").read_text() == "bench.example.org\n"


# --- item 2: an unreadable cell -------------------------------------------------------------------------------


@pytest.fixture
def env(store: Warehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PipelineEnv:
    env = make_env(tmp_path, monkeypatch, "http://127.0.0.1:9")
    assert env.settings.warehouse_path == store.db_path
    return env


@pytest.mark.slow
def test_an_unreadable_cell_the_leaderboard_counts_is_never_published(
    env: PipelineEnv, store: Warehouse
) -> None:
    """The probe's replay: `truncate -s 500` one cell's `inferences` file, then `oabench site`. The site
    is refused in one line naming the file and the command that rebuilds it, and the pages of the last
    build (its misses, its answers on every question page, its latency chart) stay as they were."""
    first = env.cli("site")
    assert first.exit_code == 0, first.output
    site = store.root / "site"
    before = {str(p.relative_to(site)): p.read_bytes() for p in site.rglob("*") if p.is_file()}
    board = store.read("leaderboard_by_edition").sort("model_key", "edition").row(0, named=True)
    key, edition = board["model_key"], board["edition"]
    damaged = store.partition_path("inferences", cell_name(key, edition))
    with damaged.open("r+b") as handle:
        handle.truncate(500)

    refused = env.cli("site")
    assert refused.exit_code == 1, refused.output
    assert "site: FAILED" in refused.output
    assert f"cell {edition}|{key}: table inferences: {damaged} is unreadable" in refused.output
    assert f"`oabench run --models {key} --editions {edition}` rebuilds it" in refused.output
    after = {str(p.relative_to(site)): p.read_bytes() for p in site.rglob("*") if p.is_file()}
    assert after == before


@pytest.mark.slow
def test_an_unreadable_cell_the_leaderboard_does_not_count_is_left_out_with_a_line(
    env: PipelineEnv, store: Warehouse
) -> None:
    """A cell whose file went bad after the tables left it out (or before it was ever counted): the site
    is built without it, consistent with the tables, and the terminal says so in one line."""
    board = store.read("leaderboard_by_edition").sort("model_key", "edition").row(0, named=True)
    key, edition = board["model_key"], board["edition"]
    damaged = store.partition_path("inferences", cell_name(key, edition))
    with damaged.open("r+b") as handle:
        handle.truncate(500)
    with healthy_reader(store) as (con, inputs):  # what the `leaderboard` step builds them from
        assert cell_name(key, edition) in inputs.unreadable
        rebuilt = build_leaderboard_tables(con, suites=stored_suites(store))
    for name, frame in rebuilt.items():
        store.write_partition(name, frame)
    built = env.cli("site")
    assert built.exit_code == 0, built.output
    line = f"warning: cell {edition}|{key}: left out of the site (the leaderboard does not count it): "
    assert line in built.output
    assert broken_links(store.root / "site") == []

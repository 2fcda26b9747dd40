"""A catalogue listing as `model_catalogue` rows: exact prices, dates, modalities, and what is refused."""

from __future__ import annotations

import datetime as dt
import json

import polars as pl
import pytest

from oabench_pipeline.catalogue.listing import (
    CatalogueFormatError,
    decode_listing,
    listing_rows,
    takes_and_gives_text,
)
from oabench_pipeline_tests.servers.catalogue import catalogue_model

CREATED = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


def test_prices_become_exact_usd_per_million_tokens_and_unusable_ones_null() -> None:
    model = catalogue_model("acme/m", CREATED, prompt="0.0000003", completion="0.0000025")
    model["pricing"].update(request="0.005", internal_reasoning="-1", image="free", input_cache_read="1e-8")
    [row], left_out = listing_rows({"data": [model]})
    assert left_out == 0
    assert row["prompt_usd_per_mtok"] == 0.3  # Decimal: not 0.30000000000000004
    assert row["completion_usd_per_mtok"] == 2.5
    assert row["request_usd"] == 0.005  # per request, not per token
    assert row["internal_reasoning_usd_per_mtok"] is None  # OpenRouter's "-1": variable, never a guess
    assert row["image_usd"] is None
    assert row["input_cache_read_usd_per_mtok"] == 0.01
    assert json.loads(row["pricing_json"])["image"] == "free"  # the whole object is kept as listed


def test_prices_too_large_for_a_float_are_null_never_inf() -> None:
    """1e308 per token is 1e314 per million and 10**400 is past a float either way: NULL, as unusable."""
    model = catalogue_model("acme/m", CREATED, prompt="1e308", completion=str(10**400))
    model["pricing"].update(request="1e400", image="1.5e-3")
    body = json.dumps({"data": [model]}).encode().replace(b'"1e400"', b"1e400")  # a bare JSON number
    [row], _ = listing_rows(decode_listing(body))
    assert row["prompt_usd_per_mtok"] is None and row["completion_usd_per_mtok"] is None
    assert row["request_usd"] is None and row["image_usd"] == 0.0015
    assert json.loads(row["pricing_json"])["request"] == "1e400"  # kept as listed, still valid JSON


def test_dates_times_and_modalities() -> None:
    model = catalogue_model("acme/m", CREATED, expiration_date="2026-06-30", knowledge_cutoff="2025-01")
    del model["architecture"]["input_modalities"]  # only `modality` left for the inputs
    model["architecture"]["modality"] = "text+image->text"
    [row], _ = listing_rows({"data": [model]})
    assert row["created"] == CREATED
    assert row["expiration_date"] == dt.date(2026, 6, 30)
    assert row["knowledge_cutoff"] == dt.date(
        2025, 1, 31
    )  # a month alone: its last day, as the registry does
    assert row["input_modalities"] == ["text", "image"] and row["output_modalities"] == ["text"]
    assert row["supported_parameters"] == ["max_tokens", "temperature", "top_p"]


def test_items_without_an_id_or_listed_twice_are_left_out_and_counted() -> None:
    first = catalogue_model("acme/m", CREATED, name="First")
    rows, left_out = listing_rows(
        {"data": [first, {"name": "no id"}, "text", catalogue_model("acme/m", CREATED)]}
    )
    assert [r["name"] for r in rows] == ["First"] and left_out == 3


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"<html>503</html>", "not JSON"),
        (b'{"data": [{"id": "acme/half', "not JSON"),
        (b'{"models": []}', "a `data` list"),
        (b"[1, 2]", "a `data` list"),
        (b'{"data": []}', "holds no model"),
        (b'{"data": [{"name": "x"}]}', "holds no model"),
    ],
)
def test_a_body_that_is_no_listing_is_refused_whole(body: bytes, expected: str) -> None:
    with pytest.raises(CatalogueFormatError, match=expected):
        listing_rows(decode_listing(body))


@pytest.mark.parametrize(
    ("inputs", "outputs", "taken"),
    [
        (["text"], ["text"], True),
        (["text", "image", "file"], ["text"], True),  # multimodal models read the exam's text too
        (["image"], ["image"], False),
        (["text"], ["image"], False),
        (None, ["text"], False),
    ],
)
def test_only_models_that_read_and_write_text(
    inputs: list[str] | None, outputs: list[str], taken: bool
) -> None:
    assert takes_and_gives_text(inputs, outputs) is taken


def test_what_changed_between_two_snapshots() -> None:
    from oabench_pipeline.catalogue.client import Listing
    from oabench_pipeline.catalogue.snapshots import snapshot_changes, snapshot_of

    def snapshot(*models: dict):
        rows, _ = listing_rows({"data": list(models)})
        return snapshot_of(Listing(CREATED, "http://catalogue", rows, 0)).frame

    before = snapshot(
        catalogue_model("acme/same", CREATED, name=""),
        catalogue_model("acme/repriced", CREATED, prompt="0.000001"),
        catalogue_model("acme/retiring", CREATED),
        catalogue_model("acme/gone", CREATED),
    )
    after = snapshot(
        catalogue_model("acme/same", CREATED, name=""),
        catalogue_model("acme/repriced", CREATED, prompt="0.000002"),
        catalogue_model("acme/retiring", CREATED, expiration_date="2026-07-01"),
        catalogue_model("acme/new", CREATED),
    )
    changes = snapshot_changes(before, after)
    assert dict(changes.select("model", "change").iter_rows()) == {
        "acme/gone": "gone",
        "acme/new": "new",
        "acme/repriced": "price",
        "acme/retiring": "expiration",
    }
    assert (
        changes.filter(pl.col("model") == "acme/repriced")["before"].item().startswith("$1.0/$2.0 per Mtok")
    )
    assert changes.filter(pl.col("model") == "acme/new")["before"].item() is None
    assert snapshot_changes(None, after)["change"].to_list() == ["new"] * 4

"""The catalogue client against hostile bodies from a loopback catalogue: whatever the body, one line or a snapshot."""

from __future__ import annotations

import datetime as dt

import pytest

from oabench_pipeline.catalogue.client import fetch_listing
from oabench_pipeline.catalogue.listing import CatalogueFetchError
from oabench_pipeline.catalogue.snapshots import snapshot_of
from oabench_pipeline_tests.servers.catalogue import CatalogueServer, catalogue_model

CREATED = dt.datetime(2026, 3, 1)


def test_a_listing_nested_too_deep_is_one_line_not_a_recursion_error() -> None:
    with CatalogueServer(state="nested") as server, pytest.raises(CatalogueFetchError) as refused:
        fetch_listing(server.url, timeout_s=10)
    assert str(refused.value) == (
        f"GET {server.url}: not a model listing: JSON nested too deep to decode; the body starts "
        f"'{{\"data\": {'[' * 51}'"
    )


def test_counts_no_int64_column_holds_are_null_and_the_snapshot_is_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A `context_length` of 2^63 or more made polars fail the snapshot, and every one after it."""
    models = [
        catalogue_model("acme/huge", CREATED, context_length=2**63),
        catalogue_model("acme/googol", CREATED, context_length=10**400),
        catalogue_model("acme/negative", CREATED, context_length=-1),
        catalogue_model("acme/fine", CREATED, context_length=2**63 - 1),
    ]
    with CatalogueServer(models=models) as server:
        listing = fetch_listing(server.url, timeout_s=10)
    frame = snapshot_of(listing).frame
    assert dict(frame.select("model", "context_length").iter_rows()) == {
        "acme/huge": None,
        "acme/googol": None,
        "acme/negative": None,
        "acme/fine": 2**63 - 1,
    }
    assert [r.getMessage() for r in caplog.records if r.name == "oabench_pipeline.catalogue.listing"] == [
        "catalogue model acme/huge: context_length 9223372036854775808 is negative or beyond a 64-bit "
        "integer: stored as NULL",
        "catalogue model acme/googol: context_length 100000000000... (401 digits) is negative or beyond a "
        "64-bit integer: stored as NULL",
        "catalogue model acme/negative: context_length -1 is negative or beyond a 64-bit integer: stored as "
        "NULL",
    ]

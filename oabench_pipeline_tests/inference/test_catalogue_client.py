"""The catalogue fetch on loopback servers: redirects checked hop by hop, a foreign host never quoted."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from oabench_pipeline.catalogue.client import MAX_REDIRECTS, fetch_listing
from oabench_pipeline.catalogue.listing import CatalogueFetchError
from oabench_pipeline_tests.servers.catalogue import CATALOGUE_PATH, CatalogueServer, catalogue_model
from oabench_pipeline_tests.servers.static_files import Override, StaticFileServer

SECRET = "AKIA-SECRET-FROM-THE-OTHER-HOST"


@pytest.fixture
def catalogue() -> Iterator[CatalogueServer]:
    with CatalogueServer(models=[catalogue_model("acme/fit", dt.datetime(2026, 3, 1))]) as server:
        yield server


@pytest.fixture
def other_host() -> Iterator[StaticFileServer]:
    """A host the user did not name: every answer quotes a secret (a body, JSON keys, a 404's page)."""
    with StaticFileServer(root=Path("/nonexistent/other-host")) as server:
        server.overrides["/not-json"] = Override(f"<html>{SECRET}</html>".encode(), 200, "text/html")
        server.overrides["/keys"] = Override(f'{{"{SECRET}": 1}}'.encode(), 200, "application/json")
        server.overrides["/gone"] = Override(f"<html>{SECRET}</html>".encode(), 404, "text/html")
        yield server


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/latest/meta-data/",  # the same address, IPv4-mapped
        "http://0xa9fea9fe/latest/meta-data/",  # the same address, as getaddrinfo reads hex
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://[fe80::1]/",
    ],
)
def test_a_redirect_to_a_link_local_or_metadata_address_is_not_followed(
    catalogue: CatalogueServer, target: str
) -> None:
    catalogue.state, catalogue.redirect_to = "redirect", target
    with pytest.raises(CatalogueFetchError) as refused:
        fetch_listing(catalogue.url, timeout_s=2)
    message = str(refused.value)
    assert message.startswith(f"GET {catalogue.url}: redirected to http://"), message
    assert ("link-local" in message or "metadata" in message) and message.endswith("; not followed")
    assert "meta-data" not in message and "computeMetadata" not in message  # the path it chose: not shown


def test_a_catalogue_url_at_a_metadata_address_is_refused_before_sending() -> None:
    with pytest.raises(CatalogueFetchError, match=r"the host is 169\.254\.169\.254, a link-local address"):
        fetch_listing("http://169.254.169.254/api/v1/models", timeout_s=2)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/not-json", "not a model listing (from {origin}, redirected): not JSON"),
        (
            "/keys",
            "not a model listing (from {origin}, redirected): expected a JSON object with a `data` list",
        ),
        ("/gone", "HTTP 404 Not Found (from {origin}, redirected)"),
    ],
)
def test_what_a_host_the_user_did_not_name_sends_is_never_quoted(
    catalogue: CatalogueServer, other_host: StaticFileServer, path: str, expected: str
) -> None:
    catalogue.state, catalogue.redirect_to = "redirect", other_host.base_url + path
    with pytest.raises(CatalogueFetchError) as refused:
        fetch_listing(catalogue.url, timeout_s=5)
    message = str(refused.value)
    assert expected.format(origin=other_host.base_url) in message, message
    assert SECRET not in message and "\n" not in message
    assert other_host.requests[path] == 1


def test_the_named_host_is_still_quoted_and_a_redirect_to_a_listing_followed(
    catalogue: CatalogueServer,
) -> None:
    catalogue.state = "malformed"
    with pytest.raises(CatalogueFetchError, match=re.escape('the body starts \'{"data"')):
        fetch_listing(catalogue.url, timeout_s=5)
    catalogue.state = "up"
    with StaticFileServer(root=Path("/nonexistent/moved")) as moved:
        moved.overrides["/old"] = Override(b"", 301, "text/plain", headers={"Location": catalogue.url})
        listing = fetch_listing(moved.base_url + "/old", timeout_s=5)
    assert [row["model"] for row in listing.rows] == ["acme/fit"]
    assert (
        listing.url == moved.base_url + "/old" and catalogue.requests[CATALOGUE_PATH] == 2
    )  # the malformed one, then this


def test_a_redirect_loop_stops(catalogue: CatalogueServer) -> None:
    catalogue.state, catalogue.redirect_to = "redirect", CATALOGUE_PATH  # itself, for ever
    with pytest.raises(CatalogueFetchError, match=f"more than {MAX_REDIRECTS} redirects"):
        fetch_listing(catalogue.url, timeout_s=5)
    assert catalogue.requests[CATALOGUE_PATH] == MAX_REDIRECTS + 1

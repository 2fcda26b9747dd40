"""Fetch the model catalogue (`GET {OABENCH_CATALOGUE_URL}`): httpx, the environment's proxies, a deadline.

One GET of a public list, no key. httpx honours `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` and
`SSL_CERT_FILE`/`SSL_CERT_DIR` as for every other call (`trust_env`, no custom transport). The wait is
bounded as a whole, not per read: the deadline is checked while the body streams in, so a server that
sends one byte a second cannot hold a sensor tick. Every failure is one `CatalogueFetchError` line naming
the URL and what went wrong.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any

import httpx

from oabench_pipeline.core.catalogue import (
    CatalogueFetchError,
    CatalogueFormatError,
    decode_listing,
    listing_rows,
)

USER_AGENT = "oabench-pipeline (model catalogue snapshot, a few requests a day)"
MAX_LISTING_BYTES = 64 * 1024 * 1024  # OpenRouter's listing is ~1-2 MB; far more is not a model list


@dataclass(frozen=True)
class Listing:
    """One fetched listing: when, from where, its rows (table columns) and how many items were left out."""

    fetched_at: dt.datetime
    url: str
    rows: list[dict[str, Any]]
    left_out: int


def fetch_listing(url: str, timeout_s: float) -> Listing:
    """GET the catalogue and parse it; raises `CatalogueFetchError` (down, slow, not a listing)."""
    deadline = time.monotonic() + timeout_s
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))
    try:
        with (
            httpx.Client(
                timeout=timeout, follow_redirects=True, headers={"User-Agent": USER_AGENT}
            ) as client,
            client.stream("GET", url, headers={"Accept": "application/json"}) as response,
        ):
            if response.status_code != 200:
                raise CatalogueFetchError(f"GET {url}: HTTP {response.status_code} {response.reason_phrase}")
            body = _read_within(response, url, deadline, timeout_s)
    except httpx.TimeoutException:
        raise CatalogueFetchError(f"GET {url}: no answer within {timeout_s:g} s") from None
    except httpx.HTTPError as error:
        raise CatalogueFetchError(
            f"GET {url}: {type(error).__name__}: {error or 'connection failed'}"
        ) from None
    fetched_at = dt.datetime.now(dt.UTC)
    try:
        rows, left_out = listing_rows(decode_listing(body))
    except CatalogueFormatError as error:
        raise CatalogueFetchError(f"GET {url}: not a model listing: {error}") from None
    return Listing(fetched_at, url, rows, left_out)


def _read_within(response: httpx.Response, url: str, deadline: float, timeout_s: float) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():  # each piece as it arrives: the deadline is checked as it streams
        size += len(chunk)
        if size > MAX_LISTING_BYTES:
            raise CatalogueFetchError(f"GET {url}: more than {MAX_LISTING_BYTES} bytes: not a model listing")
        if time.monotonic() > deadline:
            raise CatalogueFetchError(f"GET {url}: the listing took longer than {timeout_s:g} s to arrive")
        chunks.append(chunk)
    return b"".join(chunks)

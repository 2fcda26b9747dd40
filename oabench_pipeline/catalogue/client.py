"""Fetch the model catalogue (`GET {OABENCH_CATALOGUE_URL}`): httpx, the environment's proxies, a deadline.

One GET of a public list, no key. httpx honours `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` and
`SSL_CERT_FILE`/`SSL_CERT_DIR` as for every other call (`trust_env`, no custom transport). The wait is
bounded as a whole, not per read: the deadline is checked while the body streams in, so a server that
sends one byte a second cannot hold a sensor tick. Redirects are followed by hand so that every hop gets
the address rules a model `base_url` gets, and a host the user did not name is never quoted. Every failure is one `CatalogueFetchError` line naming
the URL and what went wrong.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import httpx

from oabench_pipeline.catalogue.listing import (
    CatalogueFetchError,
    CatalogueFormatError,
    decode_listing,
    listing_rows,
)
from oabench_pipeline.core.models_registry import link_local_problem

USER_AGENT = "oabench-pipeline (model catalogue snapshot, a few requests a day)"
MAX_LISTING_BYTES = 64 * 1024 * 1024  # OpenRouter's listing is ~1-2 MB; far more is not a model list
MAX_REDIRECTS = 5  # a listing moved once or twice is followed; a chain longer than this is not a listing


@dataclass(frozen=True)
class Listing:
    """One fetched listing: when, from where, its rows (table columns) and how many items were left out."""

    fetched_at: dt.datetime
    url: str
    rows: list[dict[str, Any]]
    left_out: int


def fetch_listing(url: str, timeout_s: float) -> Listing:
    """GET the catalogue and parse it; raises `CatalogueFetchError` (down, slow, refused, not a listing).

    Redirects are followed by hand, at most `MAX_REDIRECTS`, each target checked as a model `base_url` is
    (`link_local_problem`: no link-local or cloud metadata address) before anything is sent to it. What a
    host the user did not name sends (its body, its reason phrase, its JSON keys) never reaches a message.
    """
    deadline = time.monotonic() + timeout_s
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))
    try:
        named = httpx.URL(url)
    except httpx.InvalidURL as error:
        raise CatalogueFetchError(f"GET {url}: not a valid URL ({error})") from None
    try:
        with httpx.Client(
            timeout=timeout, follow_redirects=False, headers={"User-Agent": USER_AGENT}
        ) as client:
            body, final = _get_following_redirects(client, url, named, deadline, timeout_s)
    except httpx.TimeoutException:
        raise CatalogueFetchError(f"GET {url}: no answer within {timeout_s:g} s") from None
    except httpx.HTTPError as error:
        raise CatalogueFetchError(
            f"GET {url}: {type(error).__name__}: {error or 'connection failed'}"
        ) from None
    fetched_at = dt.datetime.now(dt.UTC)
    echo = _same_host(final, named)
    try:
        rows, left_out = listing_rows(decode_listing(body, echo_body=echo), echo_body=echo)
    except CatalogueFormatError as error:
        raise CatalogueFetchError(f"GET {url}: not a model listing{_from(final, named)}: {error}") from None
    return Listing(fetched_at, url, rows, left_out)


def _get_following_redirects(
    client: httpx.Client, url: str, named: httpx.URL, deadline: float, timeout_s: float
) -> tuple[bytes, httpx.URL]:
    """(the body of the 200 the chain ends on, the URL that sent it), each hop's address checked first."""
    target = named
    for _ in range(MAX_REDIRECTS + 1):
        _check_address(url, target, named)
        with client.stream("GET", target, headers={"Accept": "application/json"}) as response:
            if response.is_redirect:
                try:
                    target = response.url.join(response.headers["location"])
                except httpx.InvalidURL:
                    raise CatalogueFetchError(
                        f"GET {url}: redirected to an address that is not a URL; not followed"
                    ) from None
                continue
            if response.status_code != 200:
                raise CatalogueFetchError(
                    f"GET {url}: HTTP {response.status_code} {_standard_phrase(response.status_code)}"
                    f"{_from(target, named)}"
                )
            return _read_within(response, url, deadline, timeout_s), target
    raise CatalogueFetchError(f"GET {url}: more than {MAX_REDIRECTS} redirects; not followed further")


def _check_address(url: str, target: httpx.URL, named: httpx.URL) -> None:
    """Refuse a hop to a scheme other than http(s) or to a link-local / metadata host (as `base_url`)."""
    hop = "" if target == named else f"redirected to {_origin(target)}, which "
    if target.scheme not in ("http", "https"):
        raise CatalogueFetchError(f"GET {url}: {hop or 'the URL '}is not http:// or https://; not followed")
    if why := link_local_problem(target.host):
        raise CatalogueFetchError(f"GET {url}: {hop or 'the host '}{why}; not followed")


def _same_host(target: httpx.URL, named: httpx.URL) -> bool:
    return (target.scheme, target.host, target.port) == (named.scheme, named.host, named.port)


def _origin(target: httpx.URL) -> str:
    """scheme://host[:port] of a hop: never its path or query, which the redirecting host chose."""
    port = f":{target.port}" if target.port is not None else ""
    host = f"[{target.host}]" if ":" in target.host else target.host
    return f"{target.scheme}://{host}{port}"


def _from(target: httpx.URL, named: httpx.URL) -> str:
    """`(from <origin>, redirected)` when the answer came from a host the user did not name, else ''."""
    return "" if _same_host(target, named) else f" (from {_origin(target)}, redirected)"


def _standard_phrase(status: int) -> str:
    """The status's standard reason phrase: the one a server sends is its own text, never shown."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "(non-standard status)"


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

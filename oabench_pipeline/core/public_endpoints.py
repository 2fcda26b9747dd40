"""What a published file may say about an endpoint: its public identity, nothing more.

A model's `base_url` is the user's own: it may carry an Azure Functions `?code=` key or any other secret
in its query string, a path naming a private deployment, or the address of a machine on their network
(Ollama on 127.0.0.1, vLLM on 192.168.x). Whatever leaves the machine (the site's downloads, the report's
exports, `oabench leaderboard`) shows an endpoint as `public_endpoint` spells it: the scheme and host of a
public host (`https://openrouter.ai`), with no port, path, query string, fragment or userinfo; and NULL
for a host that is not public (loopback, private, link-local, shared or reserved addresses in any
spelling, `localhost`, a single-label name, a name under a local-only suffix, a cloud metadata name).
NULL is also what an offline baseline has: the `kind` column tells the two apart.

The rule reads the URL only (no DNS lookup): a public-looking name that resolves to a private address
is published as its name, which is what the user wrote and what anyone resolving it would see.
The warehouse keeps `base_url` as `models.toml` spells it, for the user's own use (`oabench sql`), less the
model's API key and secret header values (read from the environment, `api_key_env`, `{ env = ... }`): a
key pasted into the URL as well is redacted there (`registry_assets.model_row`); a `base_url` with
userinfo is refused when the registry is read.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

import polars as pl

from oabench_pipeline.core.models_registry import (
    METADATA_ADDRESSES,
    METADATA_HOST_NAMES,
    embedded_ipv4,
    host_address,
)

# Columns holding an endpoint's URL, in any table: rewritten by `public_frame` before they are published.
ENDPOINT_COLUMNS = ("base_url", "catalogue_url")

# Name suffixes that only a local network resolves (RFC 6761/6762/8375, ICANN's `.internal`, common LAN ones).
LOCAL_SUFFIXES = (
    "localhost",
    "local",
    "internal",
    "lan",
    "home",
    "home.arpa",
    "localdomain",
    "intranet",
    "corp",
    "private",
    "test",
    "invalid",
)


def public_endpoint(url: str | None) -> str | None:
    """`scheme://host` of `url` when its host is public, else None (see the module docstring)."""
    if not url:
        return None
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname  # lowercased, without userinfo, port or IPv6 brackets
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not host:
        return None
    host = host.rstrip(".")
    address = host_address(host)
    if address is not None:
        if not _public_address(address):
            return None
        shown = f"[{address}]" if address.version == 6 else str(address)
        return f"{parts.scheme.lower()}://{shown}"
    if not _public_name(host):
        return None
    return f"{parts.scheme.lower()}://{host}"


def _public_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Globally routable, and so is any IPv4 address an IPv6 one stands for; not a metadata service."""
    candidates: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [address]
    if isinstance(address, ipaddress.IPv6Address) and (embedded := embedded_ipv4(address)) is not None:
        candidates.append(embedded)
    return all(c.is_global and not c.is_multicast and c not in METADATA_ADDRESSES for c in candidates)


def _public_name(host: str) -> bool:
    if "." not in host or host in METADATA_HOST_NAMES:  # `ollama`, `vllm`: a name only a LAN or Docker knows
        return False
    return not any(host == suffix or host.endswith("." + suffix) for suffix in LOCAL_SUFFIXES)


def public_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with each endpoint column (`ENDPOINT_COLUMNS`) as `public_endpoint` spells it."""
    present = [name for name in ENDPOINT_COLUMNS if name in frame.columns]
    if not present:
        return frame
    columns = []
    for name in present:
        values = frame[name].cast(pl.String)
        published = {value: public_endpoint(value) for value in values.drop_nulls().unique().to_list()}
        columns.append(values.replace_strict(published, default=None, return_dtype=pl.String))
    return frame.with_columns(columns)

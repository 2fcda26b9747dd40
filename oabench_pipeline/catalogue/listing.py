"""A model catalogue listing (OpenRouter's `GET /api/v1/models`) as rows of the `model_catalogue` table.

OpenRouter lists every model it serves: `id`, `name`, `created` (Unix time), `pricing` (USD per token or
per unit, as decimal strings), `context_length`, `architecture.input_modalities` / `output_modalities`,
`supported_parameters`, and for some `knowledge_cutoff` and `expiration_date`. Prices become numbers in
USD per million tokens (per request, image or search for the per-unit ones), converted through `Decimal`
so that "0.0000003" is 0.3 and not 0.30000000000000004. A price that is missing, not a number or negative
(OpenRouter's "-1": priced by the model it routes to) is NULL: never a guess; so is one too large for a
float (`1e308` per token, `10**400`), per token or per million, never `inf`, and a count
(`context_length`) that is negative or beyond a 64-bit integer. The whole `pricing` object is kept as JSON
too, so a field this table does not name yet is not lost.

A listing that is not a JSON object with a `data` list, or that lists no usable model, is refused as a
whole (`CatalogueFormatError`); single items that are not objects with a string `id` are left out and
counted. No Dagster and no HTTP here: `catalogue/client.py` fetches, the asset writes.
"""

from __future__ import annotations

import calendar
import datetime as dt
import json
import logging
import math
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from oabench_pipeline.core.text_safety import clean_label

# pricing field → column, USD per million tokens.
PER_MILLION_TOKEN_PRICES: dict[str, str] = {
    "prompt": "prompt_usd_per_mtok",
    "completion": "completion_usd_per_mtok",
    "internal_reasoning": "internal_reasoning_usd_per_mtok",
    "input_cache_read": "input_cache_read_usd_per_mtok",
    "input_cache_write": "input_cache_write_usd_per_mtok",
}
# pricing field → column, USD per unit (one request, one image, one web search).
PER_UNIT_PRICES: dict[str, str] = {
    "request": "request_usd",
    "image": "image_usd",
    "web_search": "web_search_usd",
}
logger = logging.getLogger(__name__)

MILLION = Decimal(1_000_000)
MAX_INT64 = 2**63 - 1
_DATE = re.compile(r"^(\d{4})-(\d{2})(?:-(\d{2}))?")


class CatalogueFormatError(ValueError):
    """The listing cannot be a snapshot (not JSON, wrong shape, no model); the message says what it got."""


class CatalogueFetchError(RuntimeError):
    """The catalogue could not be read (down, slow, not a listing); one line with the URL and the reason."""


def decode_listing(body: bytes, echo_body: bool = True) -> Any:
    """The JSON document of a listing body; `CatalogueFormatError` when it is not JSON.

    `echo_body=False` (a body from a host the user did not name, reached by a redirect): the message says
    what is wrong without quoting a byte of it.
    """
    head = body[:60].decode("utf-8", "replace").replace("\n", " ") if echo_body else None
    try:
        return json.loads(body, parse_float=_finite_float_or_text)
    except (ValueError, UnicodeDecodeError) as error:
        if head is None:
            raise CatalogueFormatError(f"not JSON ({len(body)} bytes, not shown)") from None
        raise CatalogueFormatError(f"not JSON ({error}); the body starts {head!r}") from None
    except RecursionError:  # `[[[[...` thousands deep: no listing looks like that
        shown = f"the body starts {head!r}" if head is not None else f"{len(body)} bytes, not shown"
        raise CatalogueFormatError(f"JSON nested too deep to decode; {shown}") from None


def _finite_float_or_text(literal: str) -> float | str:
    """A JSON number as a float, or as its text when a float cannot hold it (`1e400`): never `inf`,
    which `pricing_json` could not store as JSON."""
    number = float(literal)
    return number if math.isfinite(number) else literal


def listing_rows(document: Any, echo_body: bool = True) -> tuple[list[dict[str, Any]], int]:
    """(one row per listed model, items left out): the table's columns but `fetched_at`/`catalogue_url`.

    `echo_body=False`: a refusal names the document's type, never its keys (see `decode_listing`).
    """
    items = document.get("data") if isinstance(document, Mapping) else None
    if not isinstance(items, list):
        shape = (
            f"keys {sorted(document)[:5]}"
            if isinstance(document, Mapping) and echo_body
            else type(document).__name__
        )
        raise CatalogueFormatError(f"expected a JSON object with a `data` list of models, got {shape}")
    rows: dict[str, dict[str, Any]] = {}
    left_out = 0
    for item in items:
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), str) or not item["id"].strip():
            left_out += 1
            continue
        if item["id"] in rows:  # listed twice: the first listing stands
            left_out += 1
            continue
        rows[item["id"]] = model_row(item)
    if not rows:
        raise CatalogueFormatError(f"the `data` list holds no model with an `id` ({len(items)} item(s))")
    return list(rows.values()), left_out


def model_row(item: Mapping[str, Any]) -> dict[str, Any]:
    """One listed model as a row (prices per million tokens, dates as dates, modalities as lists)."""
    architecture = item.get("architecture") if isinstance(item.get("architecture"), Mapping) else {}
    assert isinstance(architecture, Mapping)
    pricing = item.get("pricing") if isinstance(item.get("pricing"), Mapping) else {}
    assert isinstance(pricing, Mapping)
    inputs, outputs = _modalities(architecture)
    row: dict[str, Any] = {
        "model": item["id"],
        "name": _label(item.get("name")),
        "created": _timestamp(item.get("created")),
        "context_length": _count(item["id"], "context_length", item.get("context_length")),
        "modality": _text(architecture.get("modality")),
        "input_modalities": inputs,
        "output_modalities": outputs,
        "supported_parameters": _strings(item.get("supported_parameters")),
        "knowledge_cutoff": _date(item.get("knowledge_cutoff")),
        "expiration_date": _date(item.get("expiration_date")),
        "pricing_json": json.dumps(dict(pricing), sort_keys=True, ensure_ascii=False) if pricing else None,
    }
    for field, column in PER_MILLION_TOKEN_PRICES.items():
        row[column] = _price(pricing.get(field), MILLION)
    for field, column in PER_UNIT_PRICES.items():
        row[column] = _price(pricing.get(field), Decimal(1))
    return row


def takes_and_gives_text(input_modalities: list[str] | None, output_modalities: list[str] | None) -> bool:
    """Whether a model reads text and writes text (multimodal ones too): the exam is text in, a letter out."""
    return "text" in (input_modalities or []) and "text" in (output_modalities or [])


def _modalities(architecture: Mapping[str, Any]) -> tuple[list[str] | None, list[str] | None]:
    """The input and output modalities, from the lists or else from `modality` ("text+image->text")."""
    inputs = _strings(architecture.get("input_modalities"))
    outputs = _strings(architecture.get("output_modalities"))
    modality = architecture.get("modality")
    if (inputs is None or outputs is None) and isinstance(modality, str) and "->" in modality:
        left, _, right = modality.partition("->")
        inputs = inputs if inputs is not None else [m for m in left.split("+") if m]
        outputs = outputs if outputs is not None else [m for m in right.split("+") if m]
    return inputs, outputs


def _price(value: Any, scale: Decimal) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = Decimal(str(value).strip())
    except InvalidOperation:
        return None
    if not number.is_finite() or number < 0:
        return None
    price = float(number * scale)  # 1e308 per token is 1e314 per million: past a float, `inf`
    if not math.isfinite(price) or not math.isfinite(float(number)):
        return None
    return price


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _label(value: Any) -> str | None:
    """A name to show: no control (terminal escapes), bidi-override or zero-width characters."""
    return clean_label(value) or None if isinstance(value, str) else None


def _integer(value: Any) -> int | None:
    """A count (e.g. `context_length`) an Int64 column holds; None for anything else: a negative one, or one
    of 2^63 or more, which would fail the snapshot's write (and so every snapshot after it)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and 0 <= value <= MAX_INT64:
        return value
    return None


def _count(model: str, field: str, value: Any) -> int | None:
    """`_integer`, with a warning naming the model when a number had to be refused (its row keeps NULL)."""
    count = _integer(value)
    if count is None and isinstance(value, int | float) and not isinstance(value, bool):
        text = str(value)
        shown = text if len(text) <= 24 else f"{text[:12]}... ({len(text)} digits)"
        logger.warning("catalogue model %s: %s %s is negative or beyond a 64-bit integer: stored as NULL",
                       model, field, shown)  # fmt: skip
    return count


def _strings(value: Any) -> list[str] | None:
    if not isinstance(value, list):
        return None
    return [v for v in value if isinstance(v, str)]


def _timestamp(value: Any) -> dt.datetime | None:
    """A Unix time (seconds) as an aware UTC datetime."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return dt.datetime.fromtimestamp(value, dt.UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _date(value: Any) -> dt.date | None:
    """`YYYY-MM-DD` (or a longer ISO time), `YYYY-MM` (its last day, as the registry does), else None."""
    if not isinstance(value, str):
        return None
    found = _DATE.match(value.strip())
    if not found:
        return None
    year, month, day = int(found.group(1)), int(found.group(2)), found.group(3)
    try:
        last = calendar.monthrange(year, month)[1]
        return dt.date(year, month, int(day) if day else last)
    except ValueError:
        return None

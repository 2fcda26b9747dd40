"""Find new OAB editions on the portal and pin their files on first download (trust on first use).

An edition counts as found only when its page links BOTH the Tipo 1 question booklet and the definitive
answer key, and both downloaded as PDFs into the raw store: the SHA-256 of those bytes becomes the pin
(`pinned_by = "first-download"`). An edition with only a preliminary key is reported as waiting. Any
failure (portal down, timeout, changed layout, a download failing or not being a PDF) skips that edition,
or the whole check, with a reason; nothing is ever recorded half-found.

Found editions are appended to the discovered-editions TOML (`Settings.discovered_editions_file`), in the
registry's format and self-contained (it carries its own `[area_schemes]` table).

No Dagster here: the sensor and the schedule call these functions, and so can a script.
"""

from __future__ import annotations

import datetime as dt
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomli_w

from oabench_pipeline.core.editions import AreaRange, Edition, PinnedFile, load_editions, parse_editions
from oabench_pipeline.core.files import HashingWriter, write_atomically
from oabench_pipeline.core.portal import (
    ExamListing,
    FirstPhaseFiles,
    PortalLayoutError,
    PortalLink,
    exam_list_url,
    parse_exam_list,
    parse_exam_page,
)
from oabench_pipeline.exams.downloads import PDF_MAGIC
from oabench_pipeline.settings import DEFAULT_PORTAL_URL, PORTAL_URL_ENV
from oabench_pipeline.shared.raw_store import RawStore

# httpx is imported inside the steps that fetch: every run's process loads this module with the Dagster
# definitions (the portal sensor), and only a sensor tick fetches.
if TYPE_CHECKING:
    import httpx

USER_AGENT = "oabench-pipeline (+https://github.com/; edition discovery, a few requests a day)"


def portal_base_url(environ: Mapping[str, str]) -> str:
    """The portal to watch: `$OABENCH_PORTAL_URL` in `environ`, else the official one."""
    return (environ.get(PORTAL_URL_ENV) or "").strip() or DEFAULT_PORTAL_URL


class DiscoveryError(RuntimeError):
    """One edition (or the whole check) could not be completed; the message says why."""


@dataclass(frozen=True)
class AreaScheme:
    """The area table new editions get: the registry's latest scheme, by name and ranges."""

    name: str
    areas: tuple[AreaRange, ...]

    @classmethod
    def of(cls, edition: Edition) -> AreaScheme:
        return cls(edition.area_scheme, edition.areas)


@dataclass(frozen=True)
class PendingEdition:
    """An edition on the portal that was not registered, and why (waiting for a file, or a failure)."""

    edition: int
    reason: str


@dataclass(frozen=True)
class DiscoveryOutcome:
    """What one portal check found. `error` set means the check as a whole failed (nothing found)."""

    found: tuple[Edition, ...] = ()
    waiting: tuple[PendingEdition, ...] = ()
    skipped: tuple[PendingEdition, ...] = ()
    error: str | None = None
    listed: tuple[int, ...] = field(default=())

    def summary(self) -> str:
        """One human line: what was found, what waits, what failed."""
        if self.error:
            return f"portal check failed: {self.error}"
        parts = []
        if self.found:
            parts.append("found editions " + ", ".join(str(e.edition) for e in self.found))
        parts += [f"edition {p.edition} waiting: {p.reason}" for p in self.waiting]
        parts += [f"edition {p.edition} skipped: {p.reason}" for p in self.skipped]
        newest = max(self.listed, default=None)
        return "; ".join(parts) or f"no new edition on the portal (newest listed: {newest})"


@dataclass(frozen=True)
class PortalPolicy:
    """How patient discovery is: the portal is slow at times, but a tick must not hang."""

    connect_timeout_s: float = 10.0
    read_timeout_s: float = 30.0
    max_pdf_bytes: int = 100 * 1024 * 1024

    def timeout(self) -> httpx.Timeout:
        import httpx

        return httpx.Timeout(self.read_timeout_s, connect=self.connect_timeout_s)


# ---------------------------------------------------------------------------------------------------------
# Fetching
# ---------------------------------------------------------------------------------------------------------


def _get_page(client: httpx.Client, url: str) -> str:
    import httpx

    try:
        response = client.get(url)
    except httpx.HTTPError as error:
        raise DiscoveryError(f"{url}: {type(error).__name__}: {error}") from None
    if response.status_code != 200:
        raise DiscoveryError(f"{url}: HTTP {response.status_code} {response.reason_phrase}")
    return response.text


def download_unpinned(client: httpx.Client, url: str, store: RawStore, max_bytes: int) -> tuple[str, int]:
    """Stream `url` into the raw store and return (sha256, size): the trust-on-first-use pin.

    The bytes must look like a PDF (an HTML error page served with status 200 is the usual failure);
    only a complete, checked file is promoted into the store, under the name of its own hash.
    """
    import httpx

    with store.staging_file() as staged:
        staged_path = Path(staged.name)
    try:
        with staged_path.open("wb") as handle, client.stream("GET", url) as response:
            if response.status_code != 200:
                raise DiscoveryError(f"{url}: HTTP {response.status_code} {response.reason_phrase}")
            writer = HashingWriter(handle)
            for block in response.iter_bytes(1 << 16):
                if writer.size + len(block) > max_bytes:
                    raise DiscoveryError(f"{url}: more than {max_bytes} bytes, not an exam PDF")
                writer.write(block)
        if not writer.head.startswith(PDF_MAGIC):
            kind = "an HTML page" if writer.head.lstrip()[:1] == b"<" else "not a PDF"
            raise DiscoveryError(f"{url}: got {kind} ({writer.size} bytes) instead of a PDF")
        store.promote(staged_path, writer.sha256)
        return writer.sha256, writer.size
    except httpx.HTTPError as error:
        raise DiscoveryError(f"{url}: {type(error).__name__}: {error}") from None
    finally:
        staged_path.unlink(missing_ok=True)


def _pin(client: httpx.Client, link: PortalLink, store: RawStore, policy: PortalPolicy) -> PinnedFile:
    sha256, size = download_unpinned(client, link.url, store, policy.max_pdf_bytes)
    return PinnedFile(label=link.label, url=link.url, sha256=sha256, bytes=size)


# ---------------------------------------------------------------------------------------------------------
# Deciding, per edition
# ---------------------------------------------------------------------------------------------------------


def waiting_reason(files: FirstPhaseFiles) -> str | None:
    """Why an exam page is not complete yet (None when booklet and definitive key are both there)."""
    if files.booklet is None:
        return "no 'Caderno de Prova - Tipo 1' on the exam page yet"
    if files.definitive_key is None:
        if files.preliminary_key is not None:
            return (
                "only a preliminary answer key so far ('Gabarito Preliminar'); waiting for the definitive one"
            )
        return "no definitive answer key ('Gabaritos Definitivos') on the exam page yet"
    if files.exam_date is None:
        return f"no exam date in the booklet label {files.booklet.label!r}"
    return None


def _pinned_edition(
    client: httpx.Client,
    listing: ExamListing,
    files: FirstPhaseFiles,
    store: RawStore,
    scheme: AreaScheme,
    policy: PortalPolicy,
) -> Edition:
    """Download both files and build the edition; raises DiscoveryError on any failure."""
    assert files.booklet is not None and files.definitive_key is not None and files.exam_date is not None
    booklet = _pin(client, files.booklet, store, policy)
    answer_key = _pin(client, files.definitive_key, store, policy)
    return Edition(
        edition=listing.edition,
        exam_name=listing.name,
        exam_date=files.exam_date,
        exam_page_url=listing.page_url,
        area_scheme=scheme.name,
        areas=scheme.areas,
        booklet=booklet,
        answer_key=answer_key,
        pinned_by="first-download",
    )


def discover_new_editions(
    portal_base_url: str,
    known_editions: set[int],
    raw_store: RawStore,
    area_scheme: AreaScheme,
    *,
    newer_than: int | None = None,
    policy: PortalPolicy | None = None,
) -> DiscoveryOutcome:
    """Check the portal for editions not in `known_editions`, pinning complete ones on first download.

    Only editions newer than `newer_than` (default: the newest known edition) are considered: the portal
    lists every past exam, and older ones are not wanted by the benchmark. Never raises for a portal or
    network problem: it comes back as `error` (whole check) or a skipped edition.
    """
    import httpx

    policy = policy or PortalPolicy()
    floor = newer_than if newer_than is not None else max(known_editions, default=0)
    list_url = exam_list_url(portal_base_url)
    headers = {"User-Agent": USER_AGENT}
    with httpx.Client(timeout=policy.timeout(), follow_redirects=True, headers=headers) as client:
        try:
            listings = parse_exam_list(_get_page(client, list_url), list_url)
        except (DiscoveryError, PortalLayoutError) as error:
            return DiscoveryOutcome(error=str(error))
        candidates = [
            item for item in listings if item.edition > floor and item.edition not in known_editions
        ]
        found: list[Edition] = []
        waiting: list[PendingEdition] = []
        skipped: list[PendingEdition] = []
        for listing in candidates:
            try:
                files = parse_exam_page(_get_page(client, listing.page_url), listing.page_url)
                reason = waiting_reason(files)
                if reason:
                    waiting.append(PendingEdition(listing.edition, reason))
                    continue
                found.append(_pinned_edition(client, listing, files, raw_store, area_scheme, policy))
            except (DiscoveryError, PortalLayoutError) as error:
                skipped.append(PendingEdition(listing.edition, str(error)))
    return DiscoveryOutcome(
        found=tuple(found),
        waiting=tuple(waiting),
        skipped=tuple(skipped),
        listed=tuple(item.edition for item in listings),
    )


# ---------------------------------------------------------------------------------------------------------
# Recording
# ---------------------------------------------------------------------------------------------------------


def _pinned_file_table(pinned: PinnedFile) -> dict[str, Any]:
    table: dict[str, Any] = {"label": pinned.label, "url": pinned.url, "sha256": pinned.sha256}
    if pinned.bytes is not None:
        table["bytes"] = pinned.bytes
    if pinned.official_url is not None:
        table["official_url"] = pinned.official_url
    return table


def _edition_table(edition: Edition) -> dict[str, Any]:
    table: dict[str, Any] = {
        "edition": edition.edition,
        "exam_name": edition.exam_name,
        "exam_label": edition.exam_label,
        "exam_date": edition.exam_date,
        "exam_page_url": edition.exam_page_url,
        "area_scheme": edition.area_scheme,
        "question_count": edition.question_count,
        "key_status": edition.key_status,
        "annulled": list(edition.annulled),
        "annulled_source": edition.annulled_source,
        "unresolved": {str(n): why for n, why in sorted(edition.unresolved.items())} or None,
        "pinned_by": edition.pinned_by,
        "booklet": _pinned_file_table(edition.booklet),
        "answer_key": _pinned_file_table(edition.answer_key),
    }
    # TOML has no null: an optional field left unset is left out (and reads back as its default).
    return {name: value for name, value in table.items() if value is not None and value != []}


def editions_toml(editions: Sequence[Edition], generated_on: dt.date | None = None) -> str:
    """The editions in the registry's TOML format, with the area schemes they use (self-contained)."""
    ordered = sorted(editions, key=lambda e: e.edition)
    schemes: dict[str, list[dict[str, Any]]] = {}
    for edition in ordered:
        schemes.setdefault(
            edition.area_scheme, [{"first": a.first, "last": a.last, "area": a.area} for a in edition.areas]
        )
    stamp = f" Last written {generated_on.isoformat()}." if generated_on else ""
    header = [
        "# Editions discovered on the OAB portal by the oab_portal_sensor, pinned on first download:",
        "# each sha256 is that of the bytes downloaded the first time (trust on first use)." + stamp,
        "# Same format as registry/editions.toml; a registry entry for the same edition wins over this one.",
        "",
    ]
    body = tomli_w.dumps({"area_schemes": schemes, "editions": [_edition_table(e) for e in ordered]})
    return "\n".join(header) + body


def record_discovered_editions(path: Path, editions: Sequence[Edition]) -> list[Edition]:
    """Add `editions` to the discovered-editions file, keeping its entries; returns the ones added.

    An edition already in the file keeps its first pin (a later download never re-pins it). The result
    is validated by reading it back before it replaces the old file.
    """
    existing = load_editions(path) if path.is_file() else []
    present = {e.edition for e in existing}
    added = [e for e in editions if e.edition not in present]
    if not added:
        return []
    text = editions_toml([*existing, *added], generated_on=dt.date.today())
    # Round-trip check before replacing anything: a file the registry loader rejects is never written.
    parse_editions(tomllib.loads(text), str(path))
    write_atomically(path, text)
    return added

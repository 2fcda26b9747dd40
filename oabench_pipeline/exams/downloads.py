"""Download official PDFs with httpx, verify them against their pinned SHA-256, keep them in the raw store.

A stored file with the right hash is reused with no network request. A bad download (404, HTML error page,
truncated body, wrong hash) raises `DownloadError` naming the edition, URL, expected and actual hash, and
never touches a good stored file: bytes only land in the store under the name of their own verified hash.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO
from urllib.parse import unquote, urlsplit

from oabench_pipeline.core.editions import Edition, FileKind, PinnedFile
from oabench_pipeline.core.files import HashingWriter
from oabench_pipeline.core.http_status import TRANSIENT_STATUSES
from oabench_pipeline.shared.raw_store import RawStore

# httpx and stamina (with tenacity) are imported inside the steps that download: every run's process loads
# this module with the Dagster definitions, and most never fetch a file.
if TYPE_CHECKING:
    import httpx

PDF_MAGIC = b"%PDF-"


class DownloadError(RuntimeError):
    """An official file could not be obtained intact."""


@functools.cache
def _retries_logged() -> None:
    """Once per process, before the first retry: stamina reports each scheduled retry through structlog when
    it is installed (Dagster installs it), whose default prints to stdout: that would mix into `oabench
    ingest`'s output. The standard logging module's "stamina" logger (stderr, or the handlers an application
    sets) carries it instead."""
    import stamina

    stamina.instrumentation.set_on_retry_hooks([stamina.instrumentation.LoggingOnRetryHook])


@dataclass(frozen=True)
class FetchedFile:
    edition: int
    kind: FileKind
    url: str
    source_url: str
    sha256: str
    path: Path
    size: int
    downloaded: bool


@dataclass(frozen=True)
class FetchedPin:
    """A pinned file of any kind in the raw store (`PdfDownloader.fetch_pinned`)."""

    url: str
    source_url: str
    sha256: str
    path: Path
    size: int
    downloaded: bool


@dataclass(frozen=True)
class DownloadPolicy:
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 60.0
    max_attempts: int = 4
    backoff_s: float = 0.5
    # Overall deadline of one file's download, all attempts included (OABENCH_DOWNLOAD_TIMEOUT_S): the read
    # timeout alone never fires on a host that drips a byte every few seconds.
    deadline_s: float = 300.0


def source_location(official_url: str, base_override: str | None) -> str:
    """Where to fetch an official URL from: itself, or the same path under another base (a mirror).

    `base_override` may be a URL (`http://127.0.0.1:8000`) or a local folder (`/data/mirror`).
    """
    if not base_override:
        return official_url
    parts = urlsplit(official_url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    if "://" in base_override and not base_override.startswith("file://"):
        return base_override.rstrip("/") + path
    folder = base_override.removeprefix("file://")
    # A folder holds the files under their decoded names, as an HTTP server maps a %-escaped path
    # (the 37th's archived booklet is `.../1A%20FASE%20OAB/37%C2%BA%20EXAME...pdf`).
    return str(Path(folder) / unquote(parts.path).lstrip("/"))


def _describe(edition: int, kind: FileKind, url: str) -> str:
    return f"edition {edition} {kind.replace('_', ' ')} ({url})"


def _verify(where: str, pinned: PinnedFile, body_head: bytes, size: int, actual_sha: str, pdf: bool) -> None:
    if pdf and (body_head.lstrip()[:1] == b"<" or not body_head.startswith(PDF_MAGIC)):
        kind_of_body = "an HTML page" if body_head.lstrip()[:1] == b"<" else "not a PDF"
        raise DownloadError(
            f"{where}: got {kind_of_body} ({size} bytes) instead of the PDF; "
            f"expected sha256 {pinned.sha256}, got {actual_sha}"
        )
    if pinned.bytes is not None and size < pinned.bytes:
        raise DownloadError(
            f"{where}: truncated download, {size} of {pinned.bytes} bytes; "
            f"expected sha256 {pinned.sha256}, got {actual_sha}"
        )
    if actual_sha != pinned.sha256:
        raise DownloadError(
            f"{where}: SHA-256 mismatch: expected {pinned.sha256}, got {actual_sha} ({size} bytes)"
        )


def _copy_local(source: Path, staged: BinaryIO) -> tuple[bytes, int, str]:
    writer = HashingWriter(staged)
    with source.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 16), b""):
            writer.write(block)
    return writer.head, writer.size, writer.sha256


def _stream_http(
    client: httpx.Client, url: str, staged: BinaryIO, where: str, deadline: _Deadline
) -> tuple[bytes, int, str]:
    writer = HashingWriter(staged)
    with client.stream("GET", url) as response:
        if response.status_code in TRANSIENT_STATUSES:
            raise _Transient(f"{where}: HTTP {response.status_code}")
        if response.status_code != 200:
            raise DownloadError(f"{where}: HTTP {response.status_code} {response.reason_phrase}")
        # Chunks as they arrive (no fixed size to fill), so a trickle is checked against the deadline.
        for block in response.iter_bytes():
            writer.write(block)
            deadline.check(where, writer.size)
    return writer.head, writer.size, writer.sha256


@dataclass(frozen=True)
class _Deadline:
    at: float
    seconds: float

    @classmethod
    def after(cls, seconds: float) -> _Deadline:
        return cls(time.monotonic() + seconds, seconds)

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def check(self, where: str, received: int) -> None:
        if self.remaining() <= 0:
            raise DownloadError(
                f"{where}: not complete after {self.seconds:g} s ({received} bytes received), the overall "
                "deadline per file (OABENCH_DOWNLOAD_TIMEOUT_S); nothing was stored"
            )


class _Transient(Exception):
    """A failure worth retrying (connection trouble, 5xx, 429)."""


class PdfDownloader:
    """Fetches pinned files into a raw store, from the official host or a mirror."""

    def __init__(
        self, store: RawStore, base_override: str | None = None, policy: DownloadPolicy | None = None
    ) -> None:
        self.store = store
        self.base_override = base_override
        self.policy = policy or DownloadPolicy()

    def fetch(self, edition: Edition, kind: FileKind) -> FetchedFile:
        pinned = edition.file(kind)
        source = source_location(pinned.url, self.base_override)
        got = self.fetch_pinned(pinned, _describe(edition.edition, kind, source), pdf=True)
        return FetchedFile(
            edition.edition, kind, got.url, got.source_url, got.sha256, got.path, got.size, got.downloaded
        )

    def fetch_pinned(self, pinned: PinnedFile, where: str, pdf: bool = False) -> FetchedPin:
        """Any pinned file (`pdf`: it must also be a PDF), reused when stored, else downloaded and verified;
        `where` names it in errors. Raises `DownloadError`; nothing lands in the store unless verified."""
        source = source_location(pinned.url, self.base_override)
        stored = self.store.verified_path(pinned.sha256)
        if stored is not None:
            return FetchedPin(pinned.url, source, pinned.sha256, stored, stored.stat().st_size, False)
        path, size = self._download(pinned, source, where, pdf)
        return FetchedPin(pinned.url, source, pinned.sha256, path, size, True)

    def _download(self, pinned: PinnedFile, source: str, where: str, pdf: bool) -> tuple[Path, int]:
        import stamina

        _retries_logged()
        deadline = _Deadline.after(self.policy.deadline_s)
        # Connection trouble, 5xx and 429 are retried with stamina's exponential backoff, bounded by the
        # attempts and by the file's overall deadline (which `_attempt` also checks after each failure).
        retrying = stamina.retry_context(
            on=_Transient,
            attempts=self.policy.max_attempts,
            timeout=self.policy.deadline_s,
            wait_initial=self.policy.backoff_s,
            wait_max=self.policy.deadline_s,
            wait_jitter=0.0,
        )
        tries = 0
        try:
            for attempt in retrying:
                with attempt:
                    tries = attempt.num
                    return self._attempt(pinned, source, where, deadline, pdf)
        except _Transient as problem:
            raise DownloadError(
                f"{problem} (gave up after {tries} attempts); "
                f"expected sha256 {pinned.sha256}, nothing verified was received"
            ) from None
        raise AssertionError("stamina ended without a result or an exception")

    def _attempt(
        self, pinned: PinnedFile, source: str, where: str, deadline: _Deadline, pdf: bool
    ) -> tuple[Path, int]:
        """One try: stream into a staging file, verify it, promote it. A failure past the deadline is final."""
        with self.store.staging_file() as staged:
            staged_path = Path(staged.name)
        try:
            with staged_path.open("wb") as handle:
                head, size, actual = self._read_into(source, handle, where, deadline)
            _verify(where, pinned, head, size, actual, pdf)
            return self.store.promote(staged_path, pinned.sha256), size
        except _Transient:
            deadline.check(where, 0)
            raise
        finally:
            staged_path.unlink(missing_ok=True)

    def _read_into(self, source: str, handle, where: str, deadline: _Deadline) -> tuple[bytes, int, str]:
        import httpx

        if "://" not in source:
            path = Path(source)
            if not path.is_file():
                raise DownloadError(f"{where}: no such file")
            return _copy_local(path, handle)
        # No single wait may outlast the deadline either (a silent host is caught by the read timeout).
        left = max(deadline.remaining(), 0.001)
        timeout = httpx.Timeout(
            min(self.policy.read_timeout_s, left), connect=min(self.policy.connect_timeout_s, left)
        )
        try:
            with httpx.Client(timeout=timeout, follow_redirects=True) as client:
                return _stream_http(client, source, handle, where, deadline)
        except httpx.TransportError as error:
            raise _Transient(f"{where}: {type(error).__name__}: {error}") from None

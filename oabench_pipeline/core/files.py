"""The two file helpers every writer uses: an atomic, durable replace, and SHA-256 while streaming."""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path
from typing import BinaryIO


def write_atomically(path: Path, data: bytes | str, mode: int = 0o644, durable: bool = True) -> Path:
    """Replace `path` with `data`: readers see the old file or the new one, never a half-written one.

    Written to a temporary name in the same folder, fsynced, then renamed over `path`, so a crash
    leaves the previous file whole. Errors (e.g. ENOSPC) propagate after the temporary file is removed.
    `durable=False` skips the fsync, for derived files a rebuild recreates (the site's thousands of
    pages): still atomic for readers, only a power cut may lose the newest version.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    # `.<uuid>.tmp`: outside every `*.parquet` glob, and what `Warehouse` sweeps up after a killed writer.
    staged = path.with_name(f".{uuid.uuid4().hex}.tmp")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(staged, path)
    finally:
        staged.unlink(missing_ok=True)
    return path


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class HashingWriter:
    """Write a stream of blocks to `handle` while taking its SHA-256, size and first bytes, in one pass."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        self._digest = hashlib.sha256()
        self.size = 0
        self.head = b""

    def write(self, block: bytes) -> None:
        self.head = self.head or block[:16]
        self._digest.update(block)
        self._handle.write(block)
        self.size += len(block)

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()

"""Writing the site's files so that a rebuild touches only what changed.

A file is written only when its bytes differ from what is on disk (unchanged files keep their bytes and
mtime, so a static host or `rsync` sees nothing to do), each one atomically (temporary name, rename: a
reader never sees half a page). A manifest of what the last build wrote lets the next one remove the
files it no longer produces (a model key gone from the warehouse) without touching anything else a
person put in the folder. It also keeps, for a file that is slow to make (a chart), a digest of what it
was made from: the same inputs next time, and the file on disk is kept without being made again.

One build at a time per folder (`folder_lock`): two builds into one folder (another `--suite` or
`--lang`, a sensor's and a person's) would interleave their pages and each remove files by its own view
of the manifest, leaving links to pages of the other build or to files it removed. The second waits for
the first and then builds from the start, so the folder ends as one whole build.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from oabench_pipeline.core.files import write_atomically

MANIFEST = ".oabench-site.json"
LOCK = ".oabench-site.lock"  # held (flock) by the build writing the folder; the kernel frees it if it dies


@contextmanager
def folder_lock(root: Path, waiting: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold `root` for one build; while another build holds it, say so through `waiting` and wait."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                waiting(f"another build is writing {root}: waiting for it to finish")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the only descriptor releases the lock


@dataclass
class SiteWriter:
    """Collects a build's files; `finish()` removes what the previous build wrote and this one did not."""

    root: Path
    written: list[str] = field(default_factory=list)
    unchanged: int = 0
    total_bytes: int = 0
    _produced: set[str] = field(default_factory=set)
    _digests: dict[str, str] = field(default_factory=dict)
    _previous: tuple[set[str], dict[str, str]] | None = None

    def previous(self) -> tuple[set[str], dict[str, str]]:
        """The files the last build wrote, and the input digests of those made from one."""
        if self._previous is None:
            self._previous = _read_manifest(self.root / MANIFEST)
        return self._previous

    def put_made(self, relative: str, digest: str, make: Callable[[], bytes]) -> None:
        """`make()`'s bytes at `relative`, made only when `digest` (of its inputs) differs from last time."""
        self._digests[relative] = digest
        if self.previous()[1].get(relative) == digest and (self.root / relative).is_file():
            self._produced.add(relative)
            self.unchanged += 1
            self.total_bytes += (self.root / relative).stat().st_size
            return
        self.put(relative, make())

    def put(self, relative: str, data: bytes | str) -> None:
        payload = data.encode("utf-8") if isinstance(data, str) else data
        if relative in self._produced:
            raise ValueError(f"site file {relative} produced twice")
        self._produced.add(relative)
        self.total_bytes += len(payload)
        target = self.root / relative
        if _same_bytes(target, payload):
            self.unchanged += 1
            return
        # Not fsynced: the site is derived from the warehouse, and a rebuild recreates any file a crash lost.
        write_atomically(target, payload, durable=False)
        self.written.append(relative)

    def finish(self) -> list[str]:
        """Remove the files the previous build wrote that this one did not; record this build's files."""
        manifest = self.root / MANIFEST
        previous, _ = self.previous()
        removed = sorted(previous - self._produced)
        for relative in removed:
            (self.root / relative).unlink(missing_ok=True)
            _remove_empty_parents(self.root, (self.root / relative).parent)
        listing = json.dumps(
            {"files": sorted(self._produced), "digests": self._digests}, indent=0, sort_keys=True
        )
        listing_bytes = listing.encode("utf-8")
        if not _same_bytes(manifest, listing_bytes):
            write_atomically(manifest, listing_bytes, durable=False)
        return removed

    @property
    def files(self) -> int:
        return len(self._produced)


def _same_bytes(path: Path, payload: bytes) -> bool:
    try:
        if path.stat().st_size != len(payload):
            return False
        return path.read_bytes() == payload
    except OSError:
        return False


def _read_manifest(path: Path) -> tuple[set[str], dict[str, str]]:
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        listed, digests = manifest["files"], manifest["digests"]
    except (OSError, ValueError, KeyError, TypeError):
        return set(), {}
    # Only plain relative paths inside the folder: a hand-edited manifest must not delete elsewhere.
    files = {
        p for p in listed if isinstance(p, str) and p and not p.startswith("/") and ".." not in p.split("/")
    }
    return files, {k: v for k, v in digests.items() if k in files and isinstance(v, str)}


def _remove_empty_parents(root: Path, folder: Path) -> None:
    while folder != root and folder.is_relative_to(root):
        try:
            folder.rmdir()  # only when empty
        except OSError:
            return
        folder = folder.parent

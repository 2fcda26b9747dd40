"""A content-addressed store of downloaded files: the file name is the SHA-256 of its bytes."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from oabench_pipeline.core.files import sha256_of


class RawStore:
    """Files under `root/<sha256>`. A file only ever lands under the name of its own hash."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path_for(self, sha256: str) -> Path:
        return self.root / sha256

    def verified_path(self, sha256: str) -> Path | None:
        """The stored file with this hash, re-hashed so a corrupted copy is never trusted."""
        path = self.path_for(sha256)
        if path.is_file() and sha256_of(path) == sha256:
            return path
        return None

    def staging_file(self) -> tempfile._TemporaryFileWrapper:
        """A temporary file in the store's folder, so promoting it is an atomic rename."""
        self.root.mkdir(parents=True, exist_ok=True)
        return tempfile.NamedTemporaryFile(dir=self.root, prefix=".incoming-", delete=False)

    def promote(self, staged: Path, sha256: str) -> Path:
        """Move a fully written, verified file into place under its hash."""
        target = self.path_for(sha256)
        os.replace(staged, target)
        return target

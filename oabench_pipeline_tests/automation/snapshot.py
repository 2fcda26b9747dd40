"""A pipeline environment built once per test module and handed to each test as it was built.

Building a scored warehouse costs Dagster runs and an `oabench run`; the tests that start from one only need
its state. `EnvSnapshot.take` copies the environment's whole root folder (warehouse, DAGSTER_HOME, models
file) aside once it is built; `restore` deletes the root and copies the snapshot back *at the same path*.
The same path matters: the DuckDB catalogue refuses files of another location by design (a copied
catalogue must not read the original's files), and the Dagster instance's SQLite storage lives in
DAGSTER_HOME under the root. No Dagster instance may be open on the root across a restore: each test
opens its own after it.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class EnvSnapshot:
    root: Path  # where the environment lives, and where each test gets it back
    saved: Path  # the copy taken once the environment was built

    @classmethod
    def take(cls, root: Path, saved: Path) -> EnvSnapshot:
        shutil.copytree(root, saved, symlinks=True)
        return cls(root, saved)

    def restore(self) -> None:
        """The root exactly as it was when the snapshot was taken, whatever the last test did to it."""
        _remove_tree(self.root)
        shutil.copytree(self.saved, self.root, symlinks=True)


def _remove_tree(root: Path, within_s: float = 10.0) -> None:
    """`shutil.rmtree`, again while it fails: the last test's launched cell runs end their processes a moment
    after the instance records them finished, writing their last files (compute logs, event-log files)
    meanwhile, so a folder emptied can be refilled before it is removed."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            shutil.rmtree(root)
            return
        except OSError:  # a file gone or added under it meanwhile
            if not root.exists():
                return
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)

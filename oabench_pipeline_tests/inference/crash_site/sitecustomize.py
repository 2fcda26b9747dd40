"""Imported at start-up by every Python process `crash_child --die-on` starts (it puts this folder first on
PYTHONPATH): Dagster's code server and the cell runs it launches watch for the same kill point as the
command, since the files a cell writes are written in its run's process."""

import os
import sys

if spec := os.environ.get("OABENCH_TEST_DIE_ON"):
    from oabench_pipeline_tests.inference.crash_child import kill_hook

    sys.addaudithook(kill_hook(spec))

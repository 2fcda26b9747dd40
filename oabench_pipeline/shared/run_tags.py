"""Run tags every layer reads: set by the cell that runs (inference), read by the engine and `oabench status`."""

from __future__ import annotations

# Every run `oabench` executes says which process runs it: `oabench status` tells a run whose process is gone
# (killed) from one in progress, which the instance alone cannot (an in-process run has no run monitor).
PID_TAG, HOST_TAG = "oabench/pid", "oabench/host"

"""The model client alone on the `one` scenario's requests (`benchmarks/matrix.py`): the efficiency the
request path reaches with no Dagster, no run and no response log, against which the scenario's figure is
read.

One process per cell, started together (as `oabench run` launches a model's cells): each builds its cell's
requests exactly as the pipeline does (`inference/cell.py: build_requests`), takes the model's slots from
the same slot files (`inference/capacity.py`), and sends them with `run_chat_requests` through the endpoint
the pipeline's resource builds. What the pipeline adds on top (run processes starting, the response log and
its fsyncs, progress relays) is the difference between the two figures.

Worker mode (one cell; run by `client_floor` below): client_floor.py WAREHOUSE EDITION MODELS_FILE
CAPACITY_ROOT CONCURRENCY; prints the number of answers received.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))


def client_floor(
    env: Mapping[str, str],
    warehouse_dir: Path,
    editions: Sequence[str],
    models_file: Path,
    root: Path,
    concurrency: int,
) -> int:
    """Run one worker per edition at once (environment `env`: the model's key variable) over a fresh slot
    folder under `root`; answers received."""
    capacity_root = root / "client-floor-capacity"
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                str(warehouse_dir),
                edition,
                str(models_file),
                str(capacity_root),
                str(concurrency),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=dict(env),
        )
        for edition in editions
    ]
    answered = 0
    for worker in workers:
        out, _ = worker.communicate()
        if worker.returncode != 0:
            raise SystemExit(f"client floor worker failed ({worker.returncode})")
        answered += int(out.split()[-1])
    return answered


def _one_cell(
    warehouse_dir: Path, edition: str, models_file: Path, capacity_root: Path, concurrency: int
) -> int:
    from oabench_pipeline.core.models_registry import known_models
    from oabench_pipeline.inference.capacity import shared_capacity
    from oabench_pipeline.inference.cell import build_requests
    from oabench_pipeline.inference.client import ChatResult, run_blocking, run_chat_requests
    from oabench_pipeline.inference.resources import ModelClientResource
    from oabench_pipeline.warehouse import Warehouse

    (model,) = known_models([models_file])
    requests = build_requests(model, Warehouse(warehouse_dir / "oabench.duckdb").read("questions", edition))
    endpoint = ModelClientResource().endpoint(model, [model])
    capacity = [shared_capacity(capacity_root, "model", model.key, concurrency)]
    results: list[ChatResult] = []
    run_blocking(run_chat_requests(endpoint, requests, concurrency, results.append, None, capacity=capacity))
    return sum(result.ok for result in results)


if __name__ == "__main__":
    warehouse, edition, models, capacity_root, concurrency = sys.argv[1:6]
    print(_one_cell(Path(warehouse), edition, Path(models), Path(capacity_root), int(concurrency)))

"""OABench Pipeline: LLMs on the Brazilian Bar Exam (OAB, 1st phase) as Dagster assets.

`oabench_pipeline.defs` is the one `Definitions` object (`dagster ... -m oabench_pipeline`). It is loaded
lazily (PEP 562) so that importing the pure core (`oabench_pipeline.core`) does not import Dagster.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "defs":
        from oabench_pipeline.definitions import defs

        return defs
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return ["defs"]

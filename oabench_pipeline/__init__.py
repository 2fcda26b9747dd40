"""OABench Pipeline: LLMs on the Brazilian Bar Exam (OAB, 1st phase) as Dagster assets.

`oabench_pipeline.defs` is the one `Definitions` object (`dagster ... -m oabench_pipeline`). It is loaded
lazily (PEP 562) so that importing the pure core (`oabench_pipeline.core`) does not import Dagster.
"""

from __future__ import annotations

from typing import Any

# The one code location name every entry point serves (`dg dev`, `dagster dev`, `oabench ui`, `dagster ...
# -m oabench_pipeline`, the runs `oabench run` launches): Dagster keys sensor and schedule state, and the
# runs it lists per location, by this name, so two names would be two sets of sensor states.
CODE_LOCATION_NAME = "oabench_pipeline"


def __getattr__(name: str) -> Any:
    if name == "defs":
        from oabench_pipeline.definitions import defs

        return defs
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return ["CODE_LOCATION_NAME", "defs"]

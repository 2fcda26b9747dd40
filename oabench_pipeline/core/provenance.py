"""Where a model's reply came from: the fields of an OpenAI-compatible body besides the answer itself.

One type for the model client's parsed body, its `ChatResult`, an imported run's records and the
`inferences` columns of the same names, so the five fields are declared once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Provenance:
    """`response_id`: the reply's `id` (e.g. OpenRouter's generation id); `response_model`: the model that
    actually answered; `finish_reason`: choices[0].finish_reason; `response_provider`: the upstream that
    served it (OpenRouter's `provider`); `system_fingerprint`: the backend configuration. None when absent."""

    response_id: str | None = None
    response_model: str | None = None
    finish_reason: str | None = None
    response_provider: str | None = None
    system_fingerprint: str | None = None

    def columns(self) -> dict[str, str | None]:
        """As the flat columns (and response-log keys) of the same names."""
        return asdict(self)

    @classmethod
    def from_columns(cls, record: Mapping[str, Any]) -> Provenance:
        """From a flat mapping that may hold the columns; an absent one is None."""
        return cls(**{name: record.get(name) for name in PROVENANCE_COLUMNS})


PROVENANCE_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Provenance))

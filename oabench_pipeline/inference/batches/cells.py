"""Where a cell's batches are recorded, how they are reached, and what they stand at: what the cell's run,
`oabench run --batch`, `oabench status`, `oabench batches` and `batch_results_sensor` share (no Dagster).

A cell's journal is beside the response logs' folder and not in it (`spend.py` sums every `*.jsonl` under
`responses/` as money paid), laid out as its response log is:

- a 1st-phase cell (`phase1`): `warehouse/batches/<model key>/<edition>.jsonl`;
- a 2nd-phase answer cell (`phase2`): `warehouse/batches/phase2/<model key>/<edition>.jsonl`;
- a judgment cell (`judgments`): `warehouse/batches/judgments/<judge key>/<judged model key>.jsonl`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal
from urllib.parse import quote, unquote

from oabench_pipeline.inference.batches.journal import BatchJournal, Intent
from oabench_pipeline.inference.batches.openai import OpenAIBatches
from oabench_pipeline.inference.batches.openrouter import OpenRouterBatches
from oabench_pipeline.inference.batches.transport import BatchInfo, BatchTransport
from oabench_pipeline.inference.response_log import cell_log_path
from oabench_pipeline.inference.types import EndpointConfig

# Both providers bill a batch at half the listed per-token price: OpenRouter "typically 50%" (its batch
# guide), OpenAI 50% of input and output tokens (docs/design/batch-apis.md says where each was read).
BATCH_PRICE_FACTOR = 0.5
JOURNALS_DIR = "batches"

JournalKind = Literal["phase1", "phase2", "judgments"]
JOURNAL_KINDS: tuple[JournalKind, ...] = ("phase1", "phase2", "judgments")
# What tells a cell's requests apart in its journal: the exact request (its hash), not the question. A
# 1st-phase question is asked once per replicate (`--replicates`), a 2nd-phase sub-item again under a new
# completion ceiling or `--retry-invalid`: neither must pass for another request's answer. (The protocol's
# own default, the question id, is what the tests of the protocol alone use.)
LINE_KEYS: dict[JournalKind, Literal["qid", "request_hash"]] = {
    "phase1": "request_hash",
    "phase2": "request_hash",
    "judgments": "request_hash",
}

# How to give a model a batch API: said by `oabench run --batch` (no Dagster imported) and by the cell.
BATCH_API_HINT = (
    'set `batch_api = "openrouter"` or `batch_api = "openai"` on its [[models]] entry (inferred only for '
    "openrouter.ai and api.openai.com)"
)


def is_batch_pending(errors: Sequence[str]) -> bool:
    """Whether a run's failure messages are a cell's batch still open, not an error."""
    return bool(errors) and all("batch pending:" in e or "batches collected;" in e for e in errors)


def journal_path(warehouse_root: Path, model_key: str, edition: str, kind: JournalKind = "phase1") -> Path:
    """The journal of a cell: `model_key` sends (the judge, for a judgment cell), `edition` is the cell's
    other dimension (the judged model's key, for a judgment cell)."""
    # A judged model's key may hold a slash: quoted, so that the journal stays one file in its judge's folder.
    other = quote(edition, safe="") if kind == "judgments" else edition
    return cell_log_path(_kind_root(warehouse_root, kind), model_key, other)


def _kind_root(warehouse_root: Path, kind: JournalKind) -> Path:
    return warehouse_root / JOURNALS_DIR / ("" if kind == "phase1" else kind)


def open_transport(batch_api: str, endpoint: EndpointConfig) -> BatchTransport:
    """The transport of `batch_api` ("openrouter" or "openai") over the model's endpoint."""
    if batch_api == "openai":
        return OpenAIBatches(endpoint)
    if batch_api == "openrouter":
        return OpenRouterBatches(endpoint)
    raise ValueError(f"unknown batch_api {batch_api!r}")


@dataclass(frozen=True)
class CellBatch:
    """One batch of a cell, as its journal knows it."""

    model_key: str
    edition: str
    token: str
    batch_id: str | None
    lines: int
    recorded_at: datetime
    closed: str | None
    final_status: str | None
    answered: int
    failed: int
    kind: JournalKind = "phase1"

    @property
    def label(self) -> str:
        """How `oabench batches` names the cell."""
        if self.kind == "judgments":
            return f"{self.model_key} judging {self.edition}"
        return f"{self.model_key} × {self.edition}" + (" (2nd phase)" if self.kind == "phase2" else "")

    @property
    def is_open(self) -> bool:
        return self.closed is None

    def age(self, now: datetime | None = None) -> str:
        seconds = int(((now or datetime.now(UTC)) - self.recorded_at).total_seconds())
        if seconds < 120:
            return f"{seconds}s"
        if seconds < 7200:
            return f"{seconds // 60}m"
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def cell_batches(
    warehouse_root: Path, model_key: str, edition: str, kind: JournalKind = "phase1"
) -> list[CellBatch]:
    """The cell's batches, oldest first (none when it never used a batch)."""
    path = journal_path(warehouse_root, model_key, edition, kind)
    return [_batch(model_key, edition, i, kind) for i in BatchJournal(path).replay().intents.values()]


def all_journals(warehouse_root: Path, kind: JournalKind = "phase1") -> Iterator[tuple[str, str, Path]]:
    """(sending key, edition or judged key, journal path) of every cell of `kind` that has a journal."""
    root = _kind_root(warehouse_root, kind)
    if not root.is_dir():
        return
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        for path in sorted(folder.glob("*.jsonl")):
            yield unquote(folder.name), unquote(path.stem), path


def all_batches(warehouse_root: Path) -> list[CellBatch]:
    """The batches of every cell of every kind."""
    return [
        _batch(key, other, intent, kind)
        for kind in JOURNAL_KINDS
        for key, other, path in all_journals(warehouse_root, kind)
        for intent in BatchJournal(path).replay().intents.values()
    ]


def open_batches(
    warehouse_root: Path, model_key: str, edition: str, kind: JournalKind = "phase1"
) -> list[CellBatch]:
    return [b for b in cell_batches(warehouse_root, model_key, edition, kind) if b.is_open]


def ready_to_collect(batches: list[CellBatch], status: Callable[[str], BatchInfo]) -> bool:
    """Whether a run of the cell has something to do now: a batch finished, or an intent whose id was lost
    (the run looks it up). A batch still running needs no run."""
    for batch in batches:
        if batch.batch_id is None:
            return True
        if status(batch.batch_id).terminal:
            return True
    return False


def pending_line(batches: list[CellBatch], infos: dict[str, BatchInfo] | None = None) -> str:
    """`batch pending: <id> (age 3m, 40/80 done, 0 failed)` for a cell's open batches."""
    parts = []
    for batch in batches:
        info = (infos or {}).get(batch.batch_id or "")
        counts = (
            f", {info.completed or 0}/{info.total or batch.lines} done, {info.failed or 0} failed"
            if info
            else ""
        )
        parts.append(
            f"{batch.batch_id or 'id not recorded yet'} (age {batch.age()}, {batch.lines} lines{counts})"
        )
    return "batch pending: " + "; ".join(parts)


def _batch(model_key: str, edition: str, intent: Intent, kind: JournalKind = "phase1") -> CellBatch:
    return CellBatch(
        model_key=model_key,
        edition=edition,
        token=intent.token,
        batch_id=intent.batch_id,
        lines=len(intent.lines),
        recorded_at=intent.recorded_at,
        closed=intent.closed,
        final_status=intent.final_status,
        answered=len(intent.answered),
        failed=len(intent.failed),
        kind=kind,
    )

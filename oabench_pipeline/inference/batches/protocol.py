"""The crash-safe batch protocol: every batch is paid for once, found again after any crash, and no
question is in two live batches.

`BatchProtocol.step` does one round, each part safe to interrupt at any instruction:

1. **Re-attach.** An intent with no batch id (the process died between the intent and the id) is looked up
   in the API's list by its client token (`transport.find`): found, its id is recorded; not found, the
   intent is abandoned (no batch was created, nothing was paid); not yet decidable (OpenRouter: a running
   batch of the same shape), its questions stay held.
2. **Collect.** Every open batch is polled; a finished one (completed, expired, cancelled, failed) has its
   results read page by page and handed to `on_result` as `BatchLineResult`s, then `collected` is
   recorded with the lines answered and the lines that were not.
3. **Submit.** The requests no batch holds or answered, within `max_attempts` batches each, go into new
   batches of at most `transport.max_lines`: the intent (token, custom ids) is recorded and fsynced, the
   batch created, its id recorded at once.

A failed, expired or cancelled line is free again at step 3 of the same round. A question that used its
attempts without an answer is handed to `on_result` once, as an error result. A batch refused at create,
or `failed` as a whole (OpenRouter validates after accepting), is reported in `StepReport.rejected`, and
`run` stops there: a validation error does not heal by itself (a round that collects a failed batch
submits nothing; a later one sends its lines again, within their attempts). An HTTP or transport error
propagates with the journal as it was: the next round takes up from there.

After each named step (`STEPS`) `after_step(name)` is called: the tests' SIGKILL point. A crash between
handing results over and recording `collected` hands the same results over again on restart (they cost
nothing more): `on_result` must keep the first answer of a `request_hash`, as the response log does.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from oabench_pipeline.inference.batches.journal import BatchJournal, Intent, JournalLine, LineKey
from oabench_pipeline.inference.batches.transport import (
    BatchLine,
    BatchRejected,
    BatchTransport,
    Found,
    LineOutcome,
    NotFound,
    StepHook,
    no_hook,
    to_chat_result,
)
from oabench_pipeline.inference.types import ChatRequest, ChatResult

STEPS: tuple[str, ...] = (
    "intent_recorded",  # the intent is on disk, nothing sent
    "file_uploaded",  # (OpenAI) the input file is uploaded, no batch yet
    "batch_created",  # the API returned the id, the journal does not have it
    "batch_id_recorded",  # the id is on disk
    "results_delivered",  # a finished batch's lines were handed over, `collected` not recorded
    "collected",  # `collected` is on disk
)
DEFAULT_MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class BatchLineResult:
    """One answered (or given-up) question: the chat path's result, and the batch it came from."""

    result: ChatResult
    batch_id: str | None
    custom_id: str | None


@dataclass
class StepReport:
    """What one round did and what is left."""

    submitted_batches: list[str] = field(default_factory=list)
    submitted_lines: int = 0
    collected_batches: list[str] = field(default_factory=list)
    answered: int = 0
    resubmittable: int = 0
    open_batches: list[str] = field(default_factory=list)
    unresolved_intents: int = 0
    pending: int = 0
    gave_up: int = 0
    rejected: list[str] = field(default_factory=list)

    @property
    def done(self) -> bool:
        """Nothing in flight and nothing left to send: every question answered or out of attempts."""
        return not self.open_batches and not self.unresolved_intents and not self.pending


@dataclass
class BatchProtocol:
    journal: BatchJournal
    transport: BatchTransport
    model: str
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    after_step: StepHook = no_hook
    secrets_to_redact: Sequence[str] = ()
    line_key: LineKey = "qid"
    """What a request is held, answered and counted by: its question, or (2nd phase) its request hash."""

    def step(
        self, requests: Sequence[ChatRequest], on_result: Callable[[BatchLineResult], None]
    ) -> StepReport:
        report = StepReport()
        self._reattach(report)
        self._collect(on_result, report)
        if not report.rejected:  # a batch failed validation: send nothing more until asked again
            self._submit(requests, report)
        return report

    def run(
        self,
        requests: Sequence[ChatRequest],
        on_result: Callable[[BatchLineResult], None],
        poll_interval_s: float = 30.0,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> StepReport:
        """Rounds until every question is answered or out of attempts, a batch is rejected at create, or
        `should_stop`."""
        while True:
            report = self.step(requests, on_result)
            if report.done or report.rejected or should_stop():
                return report
            time.sleep(poll_interval_s)

    # -------------------------------------------------------------------------------- 1. re-attach

    def _reattach(self, report: StepReport) -> None:
        state = self.journal.replay()
        for intent in state.open_intents():
            if intent.batch_id is not None:
                continue
            outcome = self.transport.find(intent, state.known_batch_ids)
            if isinstance(outcome, Found):
                self.journal.record_submitted(intent.token, outcome.batch_id, recovered=True)
                state.intents[intent.token].batch_id = outcome.batch_id
            elif isinstance(outcome, NotFound):
                self.journal.record_abandoned(intent.token, "no batch with its token in the API's list")
            else:
                report.unresolved_intents += 1

    # ---------------------------------------------------------------------------------- 2. collect

    def _collect(self, on_result: Callable[[BatchLineResult], None], report: StepReport) -> None:
        state = self.journal.replay()
        attempts = state.attempts(self.line_key)
        for intent in state.open_intents():
            if intent.batch_id is None:
                continue
            info = self.transport.status(intent.batch_id)
            if not info.terminal:
                report.open_batches.append(intent.batch_id)
                continue
            if info.status == "failed":  # refused after it was accepted (validation): nothing ran
                report.rejected.append(f"batch {intent.batch_id} failed: {info.error or 'no reason given'}")
            answered, failed = self._read_results(intent, intent.batch_id, info.status, attempts, on_result)
            self.after_step("results_delivered")
            self.journal.record_collected(intent.token, intent.batch_id, info.status, answered, failed)
            self.after_step("collected")
            report.collected_batches.append(intent.batch_id)
            report.answered += len(answered)
            report.resubmittable += len(failed)

    def _read_results(
        self,
        intent: Intent,
        batch_id: str,
        status: str,
        attempts: dict[str, int],
        on_result: Callable[[BatchLineResult], None],
    ) -> tuple[set[str], set[str]]:
        lines = {line.custom_id: line for line in intent.lines}
        started = intent.submitted_at or intent.recorded_at
        latency_ms = max(0, round((datetime.now(UTC) - started).total_seconds() * 1000))
        answered: set[str] = set()
        errors: dict[str, str] = {}
        pages = self.transport.results(batch_id) if status != "failed" else iter(())
        for page in pages:
            for outcome in page:
                line = lines.get(outcome.custom_id)
                if line is None or outcome.custom_id in answered:
                    continue  # not ours, or a line the API repeated
                if outcome.body is None:
                    errors[outcome.custom_id] = outcome.error or "no answer"
                    continue
                result = self._result(outcome, line, attempts, latency_ms)
                if not result.ok:  # a malformed body: asked again, like a failed line
                    errors[outcome.custom_id] = result.error or "malformed"
                    continue
                on_result(BatchLineResult(result, batch_id, outcome.custom_id))
                answered.add(outcome.custom_id)
        failed = set(lines) - answered
        for custom_id in sorted(failed):
            line = lines[custom_id]
            if (
                attempts.get(getattr(line, self.line_key), 0) >= self.max_attempts
            ):  # out of attempts: its error is final
                why = errors.get(custom_id, "no result line for it in the finished batch")
                final = LineOutcome(custom_id, None, why)
                on_result(
                    BatchLineResult(self._result(final, line, attempts, latency_ms), batch_id, custom_id)
                )
        return answered, failed

    def _result(
        self, outcome: LineOutcome, line: JournalLine, attempts: dict[str, int], latency_ms: int
    ) -> ChatResult:
        return to_chat_result(
            outcome,
            line.qid,
            line.request_hash,
            attempts.get(getattr(line, self.line_key), 1),
            latency_ms,
            self.secrets_to_redact,
        )

    # ----------------------------------------------------------------------------------- 3. submit

    def _submit(self, requests: Sequence[ChatRequest], report: StepReport) -> None:
        state = self.journal.replay()
        by = self.line_key
        answered, held, attempts = state.answered_qids(by), state.held_qids(by), state.attempts(by)
        free = [r for r in requests if getattr(r, by) not in answered and getattr(r, by) not in held]
        sendable = [r for r in free if attempts.get(getattr(r, by), 0) < self.max_attempts]
        report.gave_up = len(free) - len(sendable)
        for start in range(0, len(sendable), self.transport.max_lines):
            chunk = sendable[start : start + self.transport.max_lines]
            try:
                batch_id = self._submit_one(chunk)
            except BatchRejected as exc:  # a validation error does not heal by itself: reported, not retried
                report.rejected.append(str(exc))
                continue
            report.submitted_batches.append(batch_id)
            report.open_batches.append(batch_id)
            report.submitted_lines += len(chunk)

    def _submit_one(self, chunk: Sequence[ChatRequest]) -> str:
        token = secrets.token_hex(8)
        lines = [JournalLine(f"{token}:{r.qid}", r.qid, r.request_hash) for r in chunk]
        self.journal.record_intent(token, self.model, lines)
        self.after_step("intent_recorded")
        batch_lines = [BatchLine(line.custom_id, r.body) for line, r in zip(lines, chunk, strict=True)]
        try:
            batch_id = self.transport.create(token, self.model, batch_lines, self.after_step)
        except BatchRejected as exc:
            self.journal.record_rejected(token, str(exc))
            raise
        self.after_step("batch_created")
        self.journal.record_submitted(token, batch_id)
        self.after_step("batch_id_recorded")
        return batch_id

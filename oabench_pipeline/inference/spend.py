"""What the automatic runs (models the catalogue sensor registered) spent, per model and per calendar month.

The record of what was paid is the response log: every line is a reply that was received, and so paid for,
whatever became of it. A line's cost is what the endpoint reported (`total_cost_usd`: every attempt), else
its reported tokens × the catalogue's price for the model when the reply arrived (`Price.at`: a later price
change does not rewrite what a month spent), else nothing (a reply with neither has cost the
provider nothing it told us about). Months are calendar months in UTC, by when the reply arrived (a damaged line
that lost its time counts in every month asked).

`AutomaticBudget` holds one automatic cell run to the watch policy while it sends: the model's spend over
all its cells (every protocol) against `max_run_cost_usd`, and the month's spend of every automatic model
against `monthly_budget_usd`. It is also the `Limits` its requests' holds are checked against before they
are sent (`reservations.py`): what is spent plus what every request in flight holds. This cell's part is its
own exact running total (what its gate counted); so is the part of every other cell sending, which each
cell publishes as it goes (`sending`): in this process at once (`oabench run` and `oabench catalogue sync
--run` run a model's cells in threads), and to the other processes (the daemon's runs) through
`<warehouse>/capacity/budget/<pid>.json`. Cells not sending are read from their logs at most once a second.
`CellCeiling` is a hand-written model's `max_cost_usd` as the same `Limits`, for its one cell. No Dagster here.

A batch (`oabench run --batch`) is held the same way, before it is sent, but for longer: its lines are paid
when the batch finishes, hours and processes later. So its worst case (every line's prompt plus the completion
ceiling, at the batch price) is written to `<warehouse>/capacity/budget/batches/<cell>.json` under the same
cross-process lock (`AutomaticBudget.reserve_batch`), and counts as held by every later check while its line is
in an open batch of the cell's journal (or while the round that wrote it is alive: its batch may be between
intent and create). Once the batch is collected, its answers' real costs are in the response log and its
lines are held no more; a failed, expired or cancelled line is released with it.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from oabench_pipeline.inference.batches.journal import BatchJournal
from oabench_pipeline.inference.catalogue_store import Price
from oabench_pipeline.inference.cell_lock import is_held
from oabench_pipeline.inference.cost import answer_cost, cost_at, estimated_prompt_tokens
from oabench_pipeline.inference.reservations import RESERVED_COMPLETION_TOKENS, Learned, SpendGate
from oabench_pipeline.inference.response_log import cell_log_path, read_log
from oabench_pipeline.inference.types import ChatRequest

REFRESH_S = 1.0
FLOAT_SLACK_USD = 1e-9  # USD: sums of float costs that reach a limit exactly (0.1 + 0.2) still fit it
# The automatic cells sending in this process: their log → (month, spent all time, spent in that month, held
# by its requests in flight), each its exact running total (what it spent before this run and what it has
# been paid for since).
_SENDING: dict[Path, tuple[str, float, float, float]] = {}
_SENDING_LOCK = threading.Lock()


def month_of(moment: dt.datetime) -> str:
    """The calendar month (UTC) of a time, as `YYYY-MM`."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m")


def this_month() -> str:
    return month_of(dt.datetime.now(dt.UTC))


@dataclass
class Spend:
    """USD spent: what endpoints reported, plus the estimate for replies that reported no cost."""

    reported_usd: float = 0.0
    estimated_usd: float = 0.0

    @property
    def total_usd(self) -> float:
        return self.reported_usd + self.estimated_usd

    def add(self, cost: float, reported: bool) -> None:
        if reported:
            self.reported_usd += cost
        else:
            self.estimated_usd += cost


def key_logs(responses_root: Path, model_key: str) -> list[Path]:
    """Every cell log of a model key (one per edition)."""
    return sorted(cell_log_path(responses_root, model_key, "_").parent.glob("*.jsonl"))


def logged_spend(
    logs: Iterable[Path], price: Price | None, month: str | None = None, spend: Spend | None = None
) -> Spend:
    """What the replies in `logs` cost (those received in `month` only, when given), added to `spend`."""
    spend = spend if spend is not None else Spend()
    for path in logs:
        for result in read_log(path):
            # A damaged line that lost its time counts in every month asked: a budget errs towards stopping.
            if month is None or result.finished_at is None or month_of(result.finished_at) == month:
                spend.add(*answer_cost(result, price))
    return spend


def keys_spend(
    responses_root: Path,
    model_ids: Mapping[str, str],
    prices: Mapping[str, Price],
    month: str | None = None,
    skip: Collection[Path] = (),
) -> Spend:
    """What the given model keys (key → model id) spent, all time or in `month`; `skip`: logs left out."""
    spend = Spend()
    for key, model_id in model_ids.items():
        logs = [p for p in key_logs(responses_root, key) if p not in skip]
        logged_spend(logs, prices.get(model_id), month, spend)
    return spend


# The automatic cells sending in this process and in the others on the same warehouse are published to
# `<warehouse>/capacity/budget/<pid>.json` (this process's `_SENDING` under that warehouse), beside
# `<pid>.lock`, which the process holds with `flock` for its life: the kernel drops it when the process
# dies, so a dead process's holds are never counted. `budget.lock` makes a hold's check-and-take atomic
# across processes (`_HOLD_LOCK` within this one).
_HOLD_LOCK = threading.Lock()
_LIFE_LOCKS: dict[Path, int] = {}
_LEARNED: dict[Path, Learned] = {}


def budget_folder(responses_root: Path) -> Path:
    return responses_root.parent / "capacity" / "budget"


def learned_for(responses_root: Path) -> Learned:
    """What each automatic model's replies cost at most, shared by this process's automatic cells."""
    with _SENDING_LOCK:
        return _LEARNED.setdefault(responses_root, Learned())


def _publish(responses_root: Path) -> None:
    """Write this process's sending cells under `responses_root` where the other processes read them, with
    its requests of unknown cost in flight and what it learned replies cost (`reservations.Learned`)."""
    folder = budget_folder(responses_root)
    with _SENDING_LOCK:
        mine = {str(log): list(v) for log, v in _SENDING.items() if log.parent.parent == responses_root}
        folder.mkdir(parents=True, exist_ok=True)
        _hold_life_lock(folder)
        path = folder / f"{os.getpid()}.json"
        if not mine:  # nothing sending: nothing to leave behind
            path.unlink(missing_ok=True)
            return
        learned = _LEARNED.get(responses_root) or Learned()
        state = {"cells": mine, "pilots": learned.unknown_in_flight, "learned": dict(learned.max_cost)}
        temporary = path.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(state), encoding="utf-8")
        temporary.replace(path)


def _hold_life_lock(folder: Path) -> None:
    """Hold `<pid>.lock` in `folder` for this process's life (again if the folder was replaced)."""
    path = folder / f"{os.getpid()}.lock"
    fd = _LIFE_LOCKS.get(folder)
    if fd is not None:
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return
        except FileNotFoundError:
            pass
        os.close(fd)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    _LIFE_LOCKS[folder] = fd


@dataclass
class OtherProcesses:
    """What the other live processes sending automatic cells on this warehouse publish."""

    cells: dict[Path, tuple[str, float, float, float]] = field(default_factory=dict)
    pilots: int = 0
    """Their requests of unknown cost in flight."""
    learned: dict[str, float] = field(default_factory=dict)
    """Model id → the most one of its replies cost, as they learned it."""


def _other_processes(responses_root: Path) -> OtherProcesses:
    """The automatic cells other live processes publish as sending on this warehouse, and their pilots."""
    folder = budget_folder(responses_root)
    found = OtherProcesses()
    if not folder.is_dir():
        return found
    for path in folder.glob("*.json"):
        if path.stem == str(os.getpid()) or not is_held(folder / f"{path.stem}.lock"):
            continue  # this process, or one that died (its lock is free): its holds are void
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
            for log, (month, all_time, in_month, held) in state["cells"].items():
                found.cells[Path(log)] = (str(month), float(all_time), float(in_month), float(held))
            found.pilots += int(state["pilots"])
            for model_id, cost in state["learned"].items():
                found.learned[model_id] = max(float(cost), found.learned.get(model_id, 0.0))
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            continue  # being replaced, or not ours: the next look reads it
    return found


@contextmanager
def _across_processes(responses_root: Path) -> Iterator[None]:
    """One hold at a time on this warehouse: in this process (`_HOLD_LOCK`), then across processes."""
    with _HOLD_LOCK:
        folder = budget_folder(responses_root)
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / "budget.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing drops the lock


def batch_reservation_path(responses_root: Path, own_log: Path) -> Path:
    """Where the worst case of a cell's batches is held: one file a cell (its log's key folder and edition)."""
    return budget_folder(responses_root) / "batches" / f"{own_log.parent.name}--{own_log.stem}.json"


@dataclass(frozen=True)
class BatchReservation:
    """The worst case held for a cell's batches: request hash → USD, with the journal that says which of
    its lines are still in an open batch, and the process whose round wrote it (None once the round ended)."""

    log: Path
    journal: Path
    lines: dict[str, float]
    pid: int | None

    def held(self) -> dict[str, float]:
        """The lines still held: all while the round that wrote them is alive, else those in open batches."""
        folder = budget_folder(self.log.parent.parent)
        if self.pid is not None and (self.pid == os.getpid() or is_held(folder / f"{self.pid}.lock")):
            return dict(self.lines)
        open_lines = BatchJournal(self.journal).replay().held_qids("request_hash")
        return {h: usd for h, usd in self.lines.items() if h in open_lines}

    def write(self, path: Path) -> None:
        if not self.lines:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {"log": str(self.log), "journal": str(self.journal), "lines": self.lines, "pid": self.pid}
        temporary = path.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(state), encoding="utf-8")
        temporary.replace(path)


def read_batch_reservation(path: Path) -> BatchReservation | None:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        lines = {str(h): float(usd) for h, usd in state["lines"].items()}
        pid = None if state["pid"] is None else int(state["pid"])
        return BatchReservation(Path(state["log"]), Path(state["journal"]), lines, pid)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None  # gone, or not ours


def batch_holds(responses_root: Path) -> dict[Path, float]:
    """Cell log → what its batches hold now (`BatchReservation.held`), for every cell under this root."""
    folder = budget_folder(responses_root) / "batches"
    if not folder.is_dir():
        return {}
    holds: dict[Path, float] = {}
    for path in folder.glob("*.json"):
        reservation = read_batch_reservation(path)
        if reservation is not None and (held := sum(reservation.held().values())):
            holds[reservation.log] = held
    return holds


@dataclass
class AutomaticBudget:
    """The watch policy's two limits on one automatic cell run (see the module docstring), and the `Limits`
    its requests' holds are checked against (`reservations.py`)."""

    responses_root: Path
    own_log: Path
    model_id: str
    model_keys: dict[str, str]
    """The automatic keys of this model (one per protocol) → model id."""
    automatic_keys: dict[str, str]
    """Every automatic key → model id (the month's budget is theirs together)."""
    prices: Mapping[str, Price]
    ceiling_usd: float
    monthly_budget_usd: float
    month: str = field(default_factory=this_month)
    completion_tokens: int = RESERVED_COMPLETION_TOKENS
    """Completion tokens a request's hold assumes (the policy's `reserved_completion_tokens`)."""
    _own_all: float = 0.0
    _own_month: float = 0.0
    _run_paid: float = 0.0
    """What this run's replies cost (attempts settled, results finished), counted by its gate."""
    _held: float = 0.0
    """What this run's requests in flight hold."""
    _elsewhere: tuple[float, float] = (0.0, 0.0)
    _read_at: float | None = None
    _read_without: frozenset[Path] = frozenset()
    """The logs of the sending cells when the others' were read: counted live, not from disk."""
    _sending: bool = False

    def start(self) -> None:
        """Read this cell's log (what it spent before this run) and the others'; learn what one reply of
        the model cost at most from its logs."""
        price = self.prices.get(self.model_id)
        own = logged_spend([self.own_log], price)
        own_month = logged_spend([self.own_log], price, self.month)
        self._own_all, self._own_month = own.total_usd, own_month.total_usd
        self._refresh(self._siblings())
        learned = learned_for(self.responses_root)
        for key in self.model_keys:
            for path in key_logs(self.responses_root, key):
                for result in read_log(path):
                    cost, reported = answer_cost(result, price)
                    if reported or cost > 0:
                        learned.learn(self.model_id, cost)

    def gate(self) -> SpendGate:
        """What this cell's requests hold before they are sent."""
        return SpendGate(
            limits=self,
            model_id=self.model_id,
            price=self.prices.get(self.model_id),
            learned=learned_for(self.responses_root),
            completion_tokens=self.completion_tokens,
        )

    @contextmanager
    def sending(self) -> Iterator[None]:
        """While this cell sends: the other cells of this process, and of the others, see its running spend
        and holds at once."""
        with _SENDING_LOCK:
            _SENDING[self.own_log] = (self.month, self._own_all, self._own_month, 0.0)
        self._sending = True
        _publish(self.responses_root)
        try:
            yield
        finally:
            self._sending = False
            with _SENDING_LOCK:
                _SENDING.pop(self.own_log, None)
            _publish(self.responses_root)

    # -- Limits (reservations.py)

    def atomically(self) -> AbstractContextManager[object]:
        return _across_processes(self.responses_root)

    def add(self, held_usd: float, paid_usd: float) -> None:
        self._held += held_usd
        self._run_paid += paid_usd
        if self._sending:
            with _SENDING_LOCK:
                _SENDING[self.own_log] = (
                    self.month,
                    self._own_all + self._run_paid,
                    self._own_month + self._run_paid,
                    self._held,
                )
            _publish(self.responses_root)

    def over(self, extra_usd: float, what: str = "one more request") -> str | None:
        model, month = self.spent(held=True)
        if model + extra_usd > self.ceiling_usd + FLOAT_SLACK_USD:
            return (
                f"{self.model_id} spent and holds ${model:.4f}; {what} may cost up to "
                f"${extra_usd:.4f}, past the watch policy's max_run_cost_usd ${self.ceiling_usd:g}"
            )
        if month + extra_usd > self.monthly_budget_usd + FLOAT_SLACK_USD:
            return (
                f"automatic runs spent and hold ${month:.4f} in {self.month}; {what} may cost up to "
                f"${extra_usd:.4f}, past the watch policy's monthly_budget_usd ${self.monthly_budget_usd:g}"
            )
        return None

    # -- batches (see the module docstring)

    def batch_worst_case(self, request: ChatRequest, price_factor: float) -> float | None:
        """One batch line of `request`: its prompt plus the completion ceiling at the listed prices times
        `price_factor`; with no listed price, the most one reply of the model cost. None: not known."""
        price = self.prices.get(self.model_id)
        if price is not None and price.prompt is not None and price.completion is not None:
            listed = estimated_prompt_tokens([request.body]) * price.prompt
            return (listed + self.completion_tokens * price.completion) * price_factor
        return learned_for(self.responses_root).max_cost.get(self.model_id)

    def reserve_batch(self, journal: Path, lines: Mapping[str, float]) -> str | None:
        """Hold `lines` (request hash → worst case) of a batch about to be sent, against both limits and
        with every other hold, under the cross-process lock; None once held, else why not (nothing held).
        Lines this cell already holds in an open batch are not held twice."""
        path = batch_reservation_path(self.responses_root, self.own_log)
        with self.atomically():
            previous = read_batch_reservation(path)
            kept = previous.held() if previous is not None else {}
            need = sum(usd for h, usd in lines.items() if h not in kept)
            if problem := self.over(need, f"a batch of {len(lines)} line(s)"):
                return problem
            _hold_life_lock(budget_folder(self.responses_root))  # the round's lines held while it lives
            BatchReservation(self.own_log, journal, {**kept, **lines}, os.getpid()).write(path)
        return None

    def settle_batches(self) -> None:
        """The round is over: keep held only the lines in open batches (the collected ones' costs are in
        the response log; failed, expired, cancelled and never-sent lines are released)."""
        path = batch_reservation_path(self.responses_root, self.own_log)
        with self.atomically():
            if (previous := read_batch_reservation(path)) is None:
                return
            settled = replace(previous, pid=None)
            replace(settled, lines=settled.held()).write(path)

    def holds_elsewhere(self) -> bool:
        return any(held > 0 for _, _, _, held in self._siblings().values())

    def others_piloting(self) -> bool:
        return _other_processes(self.responses_root).pilots > 0

    def learned_elsewhere(self) -> dict[str, float]:
        return _other_processes(self.responses_root).learned

    # -- what is spent

    def _siblings(self) -> dict[Path, tuple[str, float, float, float]]:
        """The other automatic cells sending (in this process and the others), of these keys' folders."""
        folders = {cell_log_path(self.responses_root, key, "_").parent for key in self.automatic_keys}
        with _SENDING_LOCK:
            here = {log: v for log, v in _SENDING.items() if log != self.own_log and log.parent in folders}
        there = {
            log: v
            for log, v in _other_processes(self.responses_root).cells.items()
            if log != self.own_log and log.parent in folders
        }
        return {**there, **here}

    def _refresh(self, siblings: Mapping[Path, object]) -> None:
        skip = {self.own_log, *siblings}
        model = keys_spend(self.responses_root, self.model_keys, self.prices, skip=skip).total_usd
        month = keys_spend(
            self.responses_root, self.automatic_keys, self.prices, self.month, skip=skip
        ).total_usd
        self._elsewhere = (model, month)
        self._read_at = time.monotonic()
        self._read_without = frozenset(siblings)

    def spent(self, this_run_usd: float | None = None, held: bool = False) -> tuple[float, float]:
        """(the model's spend, the month's spend): what the logs and the sending cells say, this run's
        (`this_run_usd`, else what its gate counted) included; with `held`, what requests in flight hold."""
        if this_run_usd is not None:
            self._run_paid = this_run_usd
            self.add(0.0, 0.0)  # publish
        siblings = self._siblings()
        stale = self._read_at is None or time.monotonic() - self._read_at >= REFRESH_S
        if stale or frozenset(siblings) != self._read_without:  # a cell started or finished: its log
            self._refresh(siblings)
        model, month = self._elsewhere
        model_folders = {cell_log_path(self.responses_root, key, "_").parent for key in self.model_keys}
        for log, (their_month, all_time, in_month, their_held) in siblings.items():
            extra = their_held if held else 0.0
            model += all_time + extra if log.parent in model_folders else 0.0
            month += in_month + extra if their_month == self.month else 0.0
        own = self._run_paid + (self._held if held else 0.0)
        if held:  # batches sent and not collected yet: their worst case, this cell's too
            automatic = {cell_log_path(self.responses_root, key, "_").parent for key in self.automatic_keys}
            for log, usd in batch_holds(self.responses_root).items():
                model += usd if log.parent in model_folders else 0.0
                month += usd if log.parent in automatic else 0.0
        return model + self._own_all + own, month + self._own_month + own

    def estimate(self, requests: Sequence[ChatRequest]) -> float:
        """Sending `requests` at the catalogue's prompt price (0 when it lists none: the running check holds)."""
        price = self.prices.get(self.model_id)
        return cost_at(requests, price.prompt) if price is not None and price.prompt is not None else 0.0

    def reached(self, this_run_usd: float | None = None) -> str | None:
        """Why sending must stop now (a limit reached, as `max_cost_usd` stops a cell), or None."""
        model, month = self.spent(this_run_usd)
        if model >= self.ceiling_usd:
            return f"{self.model_id} spent ${model:.4f}, reaching the watch policy's max_run_cost_usd ${self.ceiling_usd:g}"
        if month >= self.monthly_budget_usd:
            return (
                f"automatic runs spent ${month:.4f} in {self.month}, reaching the watch policy's "
                f"monthly_budget_usd ${self.monthly_budget_usd:g}"
            )
        return None

    def would_pass(self, estimate_usd: float) -> str | None:
        """Why a run must not start: what is spent plus `estimate_usd` would pass a limit; or None."""
        model, month = self.spent()
        if model + estimate_usd > self.ceiling_usd:
            return (
                f"estimated ${estimate_usd:.4f} to send + ${model:.4f} spent by {self.model_id} exceeds the "
                f"watch policy's max_run_cost_usd ${self.ceiling_usd:g}"
            )
        if month + estimate_usd > self.monthly_budget_usd:
            return (
                f"estimated ${estimate_usd:.4f} to send + ${month:.4f} spent by automatic runs in {self.month} "
                f"exceeds the watch policy's monthly_budget_usd ${self.monthly_budget_usd:g}"
            )
        return None


@dataclass
class CellCeiling:
    """A hand-written model's `max_cost_usd` as the `Limits` of its cell's holds: what the cell's log says
    it spent before this run, plus what this run paid and holds, stays within it."""

    model_key: str
    ceiling_usd: float
    spent_before_usd: float
    paid_usd: float = 0.0
    held_usd: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def atomically(self) -> AbstractContextManager[object]:
        return self._lock

    def add(self, held_usd: float, paid_usd: float) -> None:
        self.held_usd += held_usd
        self.paid_usd += paid_usd

    def over(self, extra_usd: float) -> str | None:
        committed = self.spent_before_usd + self.paid_usd + self.held_usd
        if committed + extra_usd <= self.ceiling_usd + FLOAT_SLACK_USD:
            return None
        return (
            f"{self.model_key} spent and holds ${committed:.4f}; one more request may cost up to "
            f"${extra_usd:.4f}, past max_cost_usd ${self.ceiling_usd:g}"
        )

    def holds_elsewhere(self) -> bool:
        return False

    # One cell's own ceiling: what other processes send is not under it.
    def others_piloting(self) -> bool:
        return False

    def learned_elsewhere(self) -> dict[str, float]:
        return {}

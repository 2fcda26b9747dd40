"""What the automatic runs (models the catalogue sensor registered) spent, per model and per calendar month.

The record of what was paid is the response log: every line is a reply that was received, and so paid for,
whatever became of it. A line's cost is what the endpoint reported (`total_cost_usd`: every attempt), else
its reported tokens × the catalogue's price for the model when the reply arrived (`Price.at`: a later price
change does not rewrite what a month spent), else nothing (a reply with neither has cost the
provider nothing it told us about). Months are calendar months in UTC, by when the reply arrived (a damaged line
that lost its time counts in every month asked).

`AutomaticBudget` holds one automatic cell run to the watch policy while it sends: the model's spend over
all its cells (every protocol) against `max_run_cost_usd`, and the month's spend of every automatic model
against `monthly_budget_usd`. This cell's part is its own exact running total; so is the part of every other
cell sending in this process (`oabench run` and `oabench catalogue sync --run` run a model's cells in threads
at once), which each cell publishes as it goes (`sending`); the cells of other processes (the daemon's runs)
write their logs as replies arrive, and their part is re-read from disk at most once a second. No Dagster here.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from oabench_pipeline.inference.catalogue_store import Price
from oabench_pipeline.inference.cost import cost_at
from oabench_pipeline.inference.response_log import cell_log_path, read_log
from oabench_pipeline.inference.types import ChatRequest, ChatResult

REFRESH_S = 1.0
# The automatic cells sending in this process: their log → (month, spent all time, spent in that month), each
# its exact running total (what it spent before this run and what it has been paid for since).
_SENDING: dict[Path, tuple[str, float, float]] = {}
_SENDING_LOCK = threading.Lock()


def month_of(moment: dt.datetime) -> str:
    """The calendar month (UTC) of a time, as `YYYY-MM`."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m")


def this_month() -> str:
    return month_of(dt.datetime.now(dt.UTC))


def answer_cost(result: ChatResult, price: Price | None) -> tuple[float, bool]:
    """(USD, reported): the endpoint's cost, else reported tokens × the price listed when the reply arrived,
    else 0."""
    reported = result.total_cost_usd if result.total_cost_usd is not None else result.cost_usd
    if reported is not None:
        return reported, True
    price = price.at(result.finished_at) if price is not None else None
    if price is None or price.prompt is None or result.prompt_tokens is None:
        return 0.0, False
    return result.prompt_tokens * price.prompt + (result.completion_tokens or 0) * (
        price.completion or 0.0
    ), False


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


@dataclass
class AutomaticBudget:
    """The watch policy's two limits on one automatic cell run (see the module docstring)."""

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
    _own_all: float = 0.0
    _own_month: float = 0.0
    _elsewhere: tuple[float, float] = (0.0, 0.0)
    _read_at: float | None = None
    _read_without: frozenset[Path] = frozenset()
    """The logs of this process's sending cells when the others' were read: counted live, not from disk."""
    _sending: bool = False

    def start(self) -> None:
        """Read this cell's log (what it spent before this run) and the others'."""
        own = logged_spend([self.own_log], self.prices.get(self.model_id))
        own_month = logged_spend([self.own_log], self.prices.get(self.model_id), self.month)
        self._own_all, self._own_month = own.total_usd, own_month.total_usd
        self._refresh(self._siblings())

    @contextmanager
    def sending(self) -> Iterator[None]:
        """While this cell sends: the other cells of this process see its running spend at once."""
        with _SENDING_LOCK:
            _SENDING[self.own_log] = (self.month, self._own_all, self._own_month)
        self._sending = True
        try:
            yield
        finally:
            self._sending = False
            with _SENDING_LOCK:
                _SENDING.pop(self.own_log, None)

    def _siblings(self) -> dict[Path, tuple[str, float, float]]:
        """The other automatic cells sending in this process, of these keys' folders."""
        folders = {cell_log_path(self.responses_root, key, "_").parent for key in self.automatic_keys}
        with _SENDING_LOCK:
            return {log: v for log, v in _SENDING.items() if log != self.own_log and log.parent in folders}

    def _refresh(self, siblings: Mapping[Path, object]) -> None:
        skip = {self.own_log, *siblings}
        model = keys_spend(self.responses_root, self.model_keys, self.prices, skip=skip).total_usd
        month = keys_spend(
            self.responses_root, self.automatic_keys, self.prices, self.month, skip=skip
        ).total_usd
        self._elsewhere = (model, month)
        self._read_at = time.monotonic()
        self._read_without = frozenset(siblings)

    def spent(self, this_run_usd: float) -> tuple[float, float]:
        """(the model's spend, the month's spend) including `this_run_usd` sent by this run so far."""
        if self._sending:
            with _SENDING_LOCK:
                _SENDING[self.own_log] = (
                    self.month,
                    self._own_all + this_run_usd,
                    self._own_month + this_run_usd,
                )
        siblings = self._siblings()
        stale = self._read_at is None or time.monotonic() - self._read_at >= REFRESH_S
        if stale or frozenset(siblings) != self._read_without:  # a cell started or finished: its log
            self._refresh(siblings)
        model, month = self._elsewhere
        model_folders = {cell_log_path(self.responses_root, key, "_").parent for key in self.model_keys}
        for log, (their_month, all_time, in_month) in siblings.items():
            model += all_time if log.parent in model_folders else 0.0
            month += in_month if their_month == self.month else 0.0
        return model + self._own_all + this_run_usd, month + self._own_month + this_run_usd

    def estimate(self, requests: Sequence[ChatRequest]) -> float:
        """Sending `requests` at the catalogue's prompt price (0 when it lists none: the running check holds)."""
        price = self.prices.get(self.model_id)
        return cost_at(requests, price.prompt) if price is not None and price.prompt is not None else 0.0

    def reached(self, this_run_usd: float) -> str | None:
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
        model, month = self.spent(0.0)
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

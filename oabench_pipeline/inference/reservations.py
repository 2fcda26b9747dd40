"""Budget held before a request is sent, and given back once its reply's real cost is known.

A budget checked only against what replies already cost lets every request in flight pass it: with four
models' cells starting at once, `concurrency` 4 each and $1 a reply, a $3 month spent $16 before the first
reply said anything. So before each attempt the client asks `SpendGate.hold` for the attempt's worst case:

    its prompt (characters ÷ 3.5, as every estimate here) × the prompt price
    + the completion ceiling (`reserved_completion_tokens`) × the completion price,

at least the most one reply of the model has cost so far (`Learned`). It is sent only when what is spent,
what the replies still in flight hold, and this hold together stay within every limit (`Limits.over`); when
they would not, it waits while other requests hold budget (their replies may cost less than held), and
stops the cell when nothing else does. Once the reply is in, its hold is released and its real cost counted
(`settle`); the request's final result replaces that with the cost the response log will say (`finish`).

A model whose replies' cost is not known yet (no reply in its logs or in this process) is sent one request
at a time under a group of limits (`Learned.unknown_in_flight`): its first reply says what a reply really
costs, whatever the catalogue lists. No Dagster here.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

from oabench_pipeline.core.watch_policy import RESERVED_COMPLETION_TOKENS
from oabench_pipeline.inference.catalogue_store import Price
from oabench_pipeline.inference.cost import answer_cost, estimated_prompt_tokens
from oabench_pipeline.inference.types import ChatRequest, ChatResult

POLL_S = 0.1  # between looks at whether the budget held by others was given back (each reads their files)
__all__ = ["RESERVED_COMPLETION_TOKENS", "Hold", "Learned", "Limits", "SpendGate", "cost_of"]


class Limits(Protocol):
    """What a gate's holds are checked against (the watch policy's two limits, or `max_cost_usd`)."""

    def over(self, extra_usd: float) -> str | None:
        """Why what is spent and held, plus `extra_usd`, would pass a limit; None when it fits."""

    def holds_elsewhere(self) -> bool:
        """Whether other cells under the same limits hold budget now (their replies may give some back)."""

    def add(self, held_usd: float, paid_usd: float) -> None:
        """Count a change of this cell's holds and of what it paid."""

    def others_piloting(self) -> bool:
        """Whether another process under the same limits has a request of unknown cost in flight."""

    def learned_elsewhere(self) -> dict[str, float]:
        """What other processes under the same limits learned a reply of each model costs at most."""

    def atomically(self) -> AbstractContextManager[object]:
        """Held while a hold is checked and taken, so that two cells never take the same dollar."""


@dataclass
class Learned:
    """What replies of each model cost at most (per attempt), shared by the cells under one set of limits."""

    max_cost: dict[str, float] = field(default_factory=dict)
    unknown_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def learn(self, model_id: str, cost: float) -> None:
        with self.lock:
            self.max_cost[model_id] = max(cost, self.max_cost.get(model_id, 0.0))


@dataclass(frozen=True)
class Hold:
    """Budget held for one attempt; `pilot`: taken while the model's reply cost was unknown."""

    usd: float
    pilot: bool = False


def cost_of(price: Price | None, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
    """Reported tokens × the price; None when either is missing."""
    if price is None or price.prompt is None or prompt_tokens is None:
        return None
    return prompt_tokens * price.prompt + (completion_tokens or 0) * (price.completion or 0.0)


@dataclass
class SpendGate:
    """The holds of one cell (see the module docstring); the client calls `hold`, `settle`, `finish`."""

    limits: Limits
    model_id: str
    price: Price | None
    learned: Learned
    completion_tokens: int = RESERVED_COMPLETION_TOKENS
    result_cost: Callable[[ChatResult], float] | None = None
    """What the response log will say a result cost (default: reported, else tokens × price, else 0)."""
    held_usd: float = 0.0
    refused: str | None = None
    _counted: dict[str, float] = field(default_factory=dict)
    """Request hash → what its settled attempts counted so far (replaced by `finish`)."""

    def worst_case(self, request: ChatRequest) -> float:
        """One attempt of `request` at the listed prices, and at least the most a reply has cost."""
        listed = 0.0
        if self.price is not None:
            listed = estimated_prompt_tokens([request.body]) * (self.price.prompt or 0.0)
            listed += self.completion_tokens * (self.price.completion or 0.0)
        return max(listed, self.learned.max_cost.get(self.model_id, 0.0))

    async def hold(
        self, request: ChatRequest, should_stop: Callable[[], str | None] | None = None
    ) -> Hold | str:
        """Hold the worst case of one attempt, or say why it cannot be sent (the cell then stops)."""
        while True:
            with self.limits.atomically():
                # A reply meanwhile, here or in another process (each cell run is one), may have taught
                # what one costs.
                for model_id, cost in self.limits.learned_elsewhere().items():
                    self.learned.learn(model_id, cost)
                need = self.worst_case(request)
                pilot = self.model_id not in self.learned.max_cost
                pilot_busy = pilot and (self.learned.unknown_in_flight > 0 or self.limits.others_piloting())
                problem = None if pilot_busy else self.limits.over(need)
                if not pilot_busy and problem is None:
                    self.held_usd += need
                    self.learned.unknown_in_flight += pilot  # before `add`, which publishes it
                    self.limits.add(need, 0.0)
                    return Hold(need, pilot)
                waiting = pilot_busy or self.held_usd > 0 or self.limits.holds_elsewhere()
            if not waiting:
                assert problem is not None
                self.refused = problem
                return problem
            if should_stop is not None and (reason := should_stop()):
                return reason
            await asyncio.sleep(POLL_S)

    def settle(
        self,
        request: ChatRequest,
        hold: Hold,
        reported_usd: float | None,
        tokens: tuple[int | None, int | None] | None,
    ) -> None:
        """One attempt is over: give its hold back and count what its reply cost. `reported_usd`: the cost
        its reply reported; `tokens`: (prompt, completion) of the completion it carried, None when it
        carried none. A reply that reported a cost or carried a completion teaches what one costs (a
        completion with neither a reported cost nor a price costs nothing the budget can count)."""
        cost = reported_usd
        if cost is None and tokens is not None:
            cost = cost_of(self.price, *tokens) or 0.0
        with self.limits.atomically():
            self.held_usd -= hold.usd
            self._counted[request.request_hash] = self._counted.get(request.request_hash, 0.0) + (cost or 0.0)
            if cost is not None:
                self.learned.learn(self.model_id, cost)
            self.learned.unknown_in_flight -= hold.pilot
            self.limits.add(-hold.usd, cost or 0.0)  # last: it publishes what was learned

    def finish(self, result: ChatResult) -> None:
        """The request's final result: count what the response log will say it cost, not the attempts'."""
        counted = self._counted.pop(result.request_hash, 0.0)
        final = self.result_cost(result) if self.result_cost is not None else _logged_cost(result, self.price)
        with self.limits.atomically():
            self.limits.add(0.0, final - counted)


def _logged_cost(result: ChatResult, price: Price | None) -> float:
    return answer_cost(result, price)[0]

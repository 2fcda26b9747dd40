"""Which catalogue models the watch policy takes, and why each other one is skipped.

For every model of a snapshot that needs a decision, in the order the catalogue added them (oldest
first, so the month's budget goes first come, first served), the checks run in this order and the first
that fails is the reason:

1. `modality`: it must read text and write text (multimodal models too): the exam is text in, a letter out;
2. `retired`: its `expiration_date` is today or past: it is never requested;
3. `policy`: its id matches an `include` prefix, is not in `exclude`, can be a registry key, and the
   catalogue added it after `created_after`;
4. `registry`: none of its keys (one per protocol) is in the models registry already (a hand-written
   entry wins; a registered one is not registered twice);
5. `suite`: the policy's suite has an ingested edition to run it on;
6. `price`: the catalogue lists a prompt price and its estimated cost on the suite (every protocol) is
   within `max_run_cost_usd`;
7. `budget`: that estimate fits what is left of the month's budget; then it is registered, and the
   estimate is taken from what is left for the models after it.

Which models need a decision: one never decided; one skipped for `budget` or `suite` (what is left of
the month, what is ingested: both change by themselves), at every tick, a tick that still finds it short
recording nothing new; one skipped for any other reason only when the policy's decision fields
(`WatchPolicy.decision_sha256`) or the model's own listing (modalities, prices, dates: `listing_sha256`)
changed. A registered model is never decided again. No Dagster, no I/O.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from oabench_pipeline.catalogue.listing import takes_and_gives_text
from oabench_pipeline.core.models_registry import ModelConfig, key_problem
from oabench_pipeline.core.watch_policy import WatchPolicy

Outcome = Literal["registered", "skipped"]
# Skips that can end with nothing else changing (a new month, an edition ingested): decided at every tick.
TRANSIENT_REASONS = frozenset({"budget", "suite"})
# The listing fields a decision rests on: when one of them changes, a skipped model is decided again.
LISTING_FIELDS = (
    "input_modalities",
    "output_modalities",
    "created",
    "expiration_date",
    "prompt_usd_per_mtok",
    "completion_usd_per_mtok",
    "request_usd",
)


@dataclass(frozen=True)
class Decision:
    """One model's decision: registered (its keys) or skipped, the reason's kind and one line of detail."""

    model: str
    outcome: Outcome
    reason: str
    detail: str
    listing_sha256: str
    model_keys: tuple[str, ...] = ()
    estimated_cost_usd: float | None = None
    budget_left_usd: float | None = None

    def line(self) -> str:
        verdict = "registered" if self.outcome == "registered" else f"skipped ({self.reason})"
        return f"{self.model}: {verdict}: {self.detail}"


@dataclass(frozen=True)
class Context:
    """What every decision of one tick shares."""

    policy: WatchPolicy
    registry_keys: Collection[str]
    suite: str
    editions: tuple[int, ...]
    """The suite's ingested editions: the cells to run."""
    budget_left_usd: float
    today: dt.date
    entries: Callable[[Mapping[str, Any]], list[ModelConfig]]
    """The registry entries a model would get, one per protocol (raises ValueError when it cannot)."""
    estimate: Callable[[Mapping[str, Any], list[ModelConfig]], float | None]
    """The model's estimated cost on the suite's editions, every protocol (None: no usable price)."""


def listing_sha256(row: Mapping[str, Any]) -> str:
    """SHA-256 of the listing fields a decision rests on (`LISTING_FIELDS`)."""
    fields = {name: row.get(name) for name in LISTING_FIELDS}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()


def latest_decisions(rows: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Model id → its newest decision row (rows of the `catalogue_decisions` table)."""
    latest: dict[str, Mapping[str, Any]] = {}
    for row in sorted(rows, key=lambda r: r["decided_at"]):
        latest[row["model"]] = row
    return latest


def wants_decision(previous: Mapping[str, Any] | None, policy_sha256: str, listing: str) -> bool:
    """Whether a model needs a (new) decision this tick (budget skips are checked against the budget)."""
    if previous is None:
        return True
    if previous["outcome"] == "registered":
        return False
    if previous["reason"] in TRANSIENT_REASONS:
        return True
    return previous["policy_sha256"] != policy_sha256 or previous["listing_sha256"] != listing


def decide(
    rows: Iterable[Mapping[str, Any]], previous: Mapping[str, Mapping[str, Any]], context: Context
) -> list[Decision]:
    """The decisions of one tick over a snapshot's rows (see the module docstring)."""
    policy_sha = context.policy.decision_sha256
    left = context.budget_left_usd
    decisions = []
    ordered = sorted(
        rows, key=lambda r: (r.get("created") or dt.datetime.min.replace(tzinfo=dt.UTC), r["model"])
    )
    for row in ordered:
        listing = listing_sha256(row)
        before = previous.get(row["model"])
        if not wants_decision(before, policy_sha, listing):
            continue
        decision = _decide_one(row, listing, context, left)
        if _still_short(before, decision, policy_sha, listing):
            continue  # still short of budget (or of an ingested edition): nothing new to record
        if decision.outcome == "registered":
            left -= decision.estimated_cost_usd or 0.0
        decisions.append(decision)
    return decisions


def _still_short(before: Mapping[str, Any] | None, decision: Decision, policy_sha: str, listing: str) -> bool:
    return (
        before is not None
        and before["reason"] in TRANSIENT_REASONS
        and decision.reason == before["reason"]
        and before["policy_sha256"] == policy_sha
        and before["listing_sha256"] == listing
    )


def _decide_one(row: Mapping[str, Any], listing: str, context: Context, left: float) -> Decision:
    model = row["model"]

    def skipped(reason: str, detail: str, estimate: float | None = None) -> Decision:
        return Decision(model, "skipped", reason, detail, listing, (), estimate, left)

    if not takes_and_gives_text(row.get("input_modalities"), row.get("output_modalities")):
        inputs = "+".join(row.get("input_modalities") or []) or "unknown"
        outputs = "+".join(row.get("output_modalities") or []) or "unknown"
        return skipped("modality", f"not text in and text out (input {inputs}, output {outputs})")
    expiration = row.get("expiration_date")
    if expiration is not None and expiration <= context.today:
        return skipped("retired", f"expiration_date {expiration} has passed")
    if problem := _policy_problem(row, context.policy):
        return skipped("policy", problem)
    try:
        entries = context.entries(row)
    except ValueError as error:
        return skipped("policy", f"no registry entry can be made for it: {error}")
    present = [e.key for e in entries if e.key in context.registry_keys]
    if present:
        return skipped("registry", f"already in the models registry as {', '.join(present)}")
    if not context.editions:
        return skipped("suite", f"suite {context.suite!r} has no ingested edition to run it on")
    estimate = context.estimate(row, entries)
    if estimate is None:
        return skipped("price", "the catalogue lists no usable prompt price (missing or variable)")
    cost = f"estimated ${estimate:.4f} on suite {context.suite!r} ({len(context.editions)} edition(s))"
    ceiling = context.policy.max_run_cost_usd
    if estimate > ceiling:
        return skipped("price", f"{cost} is over max_run_cost_usd ${ceiling:g}", estimate)
    if estimate > left:
        return skipped(
            "budget", f"{cost} is over the ${max(left, 0.0):.4f} left of this month's budget", estimate
        )
    keys = tuple(e.key for e in entries)
    return Decision(model, "registered", "fits", f"{cost}, within the policy", listing, keys, estimate, left)


def _policy_problem(row: Mapping[str, Any], policy: WatchPolicy) -> str | None:
    model = row["model"]
    if not policy.includes(model):
        return f"id matches no include prefix ({', '.join(policy.include)})"
    if model in policy.exclude:
        return "listed in exclude"
    if problem := key_problem(model):
        return f"id unusable as a registry key: {problem}"
    if policy.created_after is not None:
        created = row.get("created")
        if created is None:
            return f"no `created` date to compare with created_after {policy.created_after}"
        if created.date() <= policy.created_after:
            return f"created {created.date()}, not after created_after {policy.created_after}"
    return None

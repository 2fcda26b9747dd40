"""One tick of the catalogue watch: fetch a snapshot, decide on its models, register the ones taken.

The sensor (`catalogue_sensor.py`) and `oabench catalogue sync` both run `run_tick`, so a tick by hand is
exactly a sensor tick. What it writes, in this order, only once everything it needs has been read and
checked (a bad policy or registry, or a catalogue that is down, slow or not JSON, writes nothing):

1. the snapshot: one `model_catalogue` partition file per fetch (`<fetched_at>.parquet`);
2. the registry entries of the models taken, appended to the generated file
   (`warehouse/catalogue_models.toml`, the registry's format; a hand-written `models.toml` key wins),
   validated by reading the whole file back before it replaces the old one;
3. the decisions, one `catalogue_decisions` partition file per tick that decided anything.

The caller adds the partitions and asks for the cells (the sensor: run requests with the queue's tags;
`sync --run`: `oabench run`'s own machinery). No Dagster here.

The month's budget (`MonthBudget`) is what `monthly_budget_usd` leaves after what automatic runs spent this
calendar month (UTC: reported cost, else tokens × the catalogue's price, `inference/spend.py`) and what
the models registered this month but not yet complete are still estimated to spend.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl
import tomli_w

from oabench_pipeline.catalogue.decisions import Context, Decision, decide, latest_decisions
from oabench_pipeline.catalogue.listing import CatalogueFetchError
from oabench_pipeline.catalogue.snapshots import (
    STAMP_FORMAT,
    Snapshot,
    snapshot_of,
    stored_snapshots,
    take_snapshot,
)
from oabench_pipeline.core.editions import load_suites, resolve_suite
from oabench_pipeline.core.files import write_atomically
from oabench_pipeline.core.models_registry import (
    ModelConfig,
    automatic_models,
    known_models,
    load_models_registry,
    parse_models_registry,
)
from oabench_pipeline.core.prompts import Protocol
from oabench_pipeline.core.watch_policy import WatchPolicy, load_watch_policy
from oabench_pipeline.inference.catalogue_store import Price, catalogue_prices, retired_models
from oabench_pipeline.inference.cell import build_requests
from oabench_pipeline.inference.cost import cost_at
from oabench_pipeline.inference.freshness import inferences_are_current, scores_are_current
from oabench_pipeline.inference.spend import Spend, keys_spend, month_of
from oabench_pipeline.inference.types import ChatRequest
from oabench_pipeline.settings import Settings, environment_value
from oabench_pipeline.warehouse import Warehouse

CATALOGUE_MODELS_HEADER = """\
# Models the model_catalogue_sensor (or `oabench catalogue sync`) took from the model catalogue under the
# watch policy (OABENCH_WATCH_FILE), generated: edit the policy, not this file. Same format as the models
# registry; a hand-written entry with the same key wins (`oabench catalogue add ID` writes one there).
# Their runs are held to the policy's max_run_cost_usd and monthly_budget_usd, and run only under a policy.
"""


# ---------------------------------------------------------------------------------------------------------
# Registry entries
# ---------------------------------------------------------------------------------------------------------


def entry_table(row: Mapping[str, Any], protocol: Protocol, policy: WatchPolicy | None) -> dict[str, Any]:
    """The `[[models]]` table of a catalogue model under one protocol, with the policy's endpoint fields."""
    label = row.get("name") or row["model"]
    table: dict[str, Any] = {
        "id": row["model"],
        "label": label if protocol == "direto" else f"{label} ({protocol})",
    }
    if protocol != "direto":
        table["protocol"] = protocol
    if policy is not None:
        table["base_url"] = policy.base_url
        table["api_key_env"] = policy.api_key_env or ""
        table["concurrency"] = policy.concurrency
    if row.get("knowledge_cutoff") is not None:
        table["knowledge_cutoff"] = row["knowledge_cutoff"]
    return table


def entries_for(
    row: Mapping[str, Any], protocols: Sequence[Protocol], policy: WatchPolicy | None
) -> list[ModelConfig]:
    """The registry entries a catalogue model gets, one per protocol; ValueError when one is invalid."""
    tables = [entry_table(row, protocol, policy) for protocol in protocols]
    return parse_models_registry(_models_toml(tables), Path(f"<catalogue entry for {row['model']}>"))


def _models_toml(tables: Sequence[Mapping[str, Any]], header: str = "") -> str:
    return header + tomli_w.dumps({"models": [dict(t) for t in tables]})


def append_registry_entries(path: Path, tables: Sequence[Mapping[str, Any]], header: str = "") -> None:
    """Add `[[models]]` tables to a registry file, keeping what it holds: validated whole before it is
    replaced (a file the registry loader would refuse is never written). A new file gets `header`."""
    existing = path.read_text(encoding="utf-8") if path.is_file() else header
    addition = _models_toml(tables)
    text = existing.rstrip("\n") + "\n\n" + addition if existing.strip() else addition
    parse_models_registry(text, path)
    write_atomically(path, text)


# ---------------------------------------------------------------------------------------------------------
# The month's budget
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MonthBudget:
    """This month's automatic spend against the policy's monthly budget."""

    month: str
    spent: Spend
    committed_usd: float
    """Still estimated to be spent by models registered this month whose cells are not complete."""
    budget_usd: float | None

    @property
    def left_usd(self) -> float:
        return (self.budget_usd or 0.0) - self.spent.total_usd - self.committed_usd

    def line(self) -> str:
        spent = f"${self.spent.total_usd:.4f} spent by automatic runs in {self.month} (UTC)"
        if self.spent.estimated_usd:
            spent += f" (${self.spent.reported_usd:.4f} reported, ${self.spent.estimated_usd:.4f} estimated)"
        if self.committed_usd:
            spent += f", ${self.committed_usd:.4f} committed to models not yet complete"
        if self.budget_usd is None:
            return spent + "; no watch policy, no budget"
        return spent + f"; monthly_budget_usd ${self.budget_usd:g}, ${max(self.left_usd, 0.0):.4f} left"

    def as_json(self) -> dict[str, Any]:
        return {
            "month": self.month,
            "spent_usd": self.spent.total_usd,
            "reported_usd": self.spent.reported_usd,
            "estimated_usd": self.spent.estimated_usd,
            "committed_usd": self.committed_usd,
            "budget_usd": self.budget_usd,
            "left_usd": self.left_usd if self.budget_usd is not None else None,
        }


def month_budget(
    store: Warehouse,
    automatic: Sequence[ModelConfig],
    policy: WatchPolicy | None,
    prices: Mapping[str, Price] | None = None,
    now: dt.datetime | None = None,
) -> MonthBudget:
    """What automatic runs spent this month, what registered models still owe, and what is left."""
    month = month_of(now or dt.datetime.now(dt.UTC))
    prices = catalogue_prices(store) if prices is None else prices
    root = store.root / "responses"
    spent = keys_spend(root, {m.key: m.id for m in automatic}, prices, month)
    by_key = {m.key: m for m in automatic}
    committed = 0.0
    decisions = store.read("catalogue_decisions")
    registered = (
        decisions.filter(pl.col("outcome") == "registered").to_dicts() if not decisions.is_empty() else []
    )
    for row in registered:
        if month_of(row["decided_at"]) != month or row["estimated_cost_usd"] is None:
            continue
        entries = [by_key[k] for k in row["model_keys"] if k in by_key]
        editions = [str(e) for e in row["editions"]]
        if not entries or all(inferences_are_current(store, m, e) for m in entries for e in editions):
            continue
        so_far = keys_spend(root, {m.key: m.id for m in entries}, prices).total_usd
        committed += max(0.0, row["estimated_cost_usd"] - so_far)
    return MonthBudget(month, spent, committed, policy.monthly_budget_usd if policy else None)


# ---------------------------------------------------------------------------------------------------------
# The tick
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WatchSetup:
    """Where a tick reads and writes."""

    store: Warehouse
    models_file: Path
    catalogue_file: Path
    watch_file: Path
    catalogue_url: str
    timeout_s: float
    editions_file: Path
    discovered_editions_file: Path | None
    packaged_models_file: Path | None = None
    """The packaged registry `models_file` adds to (None: `models_file` is the whole registry)."""

    @property
    def models_files(self) -> list[Path]:
        return [p for p in (self.packaged_models_file, self.models_file) if p is not None]

    @classmethod
    def from_settings(cls, settings: Settings) -> WatchSetup:
        """Where `oabench catalogue` reads and writes: the places the environment names."""
        return cls(
            store=Warehouse(settings.warehouse_path),
            models_file=settings.models_file,
            catalogue_file=settings.catalogue_models_file,
            watch_file=settings.watch_file,
            catalogue_url=settings.catalogue_url,
            timeout_s=settings.catalogue_timeout_s,
            editions_file=settings.editions_file,
            discovered_editions_file=settings.discovered_editions_file,
            packaged_models_file=settings.packaged_models_file,
        )


@dataclass
class TickOutcome:
    """What one tick did. `problem` set: nothing was written (and why, in one line)."""

    problem: str | None = None
    snapshot: Snapshot | None = None
    previous: Snapshot | None = None
    """The newest snapshot before this tick's."""
    left_out: int = 0
    decisions: list[Decision] = field(default_factory=list)
    registered: list[ModelConfig] = field(default_factory=list)
    suite: str | None = None
    editions: list[str] = field(default_factory=list)
    budget: MonthBudget | None = None
    policy: WatchPolicy | None = None
    fetch_failed: bool = False
    """The catalogue could not be read (down, slow, not a listing): `problem` says how."""

    @property
    def prices_changed(self) -> bool:
        """Whether `model_pricing` must be taken again from this tick's snapshot: the listing changed since
        the snapshot before (new prices, retirements), or models were registered (prices for their keys)."""
        if self.snapshot is None:
            return False
        changed = self.previous is None or self.previous.data_version != self.snapshot.data_version
        return changed or bool(self.registered)

    def summary(self) -> str:
        if self.problem:
            return self.problem
        assert self.snapshot is not None
        taken = ", ".join(m.key for m in self.registered) or "none"
        skipped = sum(d.outcome == "skipped" for d in self.decisions)
        return (
            f"catalogue snapshot {self.snapshot.fetched_at:%Y-%m-%d %H:%M:%S} UTC ({self.snapshot.frame.height} "
            f"models): {len(self.decisions)} decision(s), registered: {taken}; {skipped} skipped"
        )


def run_tick(setup: WatchSetup, now: dt.datetime | None = None) -> TickOutcome:
    """Fetch, decide, register (see the module docstring); never raises for a problem a user can fix."""
    return _tick(setup, now or dt.datetime.now(dt.UTC), write=True)


def preview_tick(setup: WatchSetup, stored: bool = False, now: dt.datetime | None = None) -> TickOutcome:
    """What a tick would decide, writing nothing: on the live listing (compared with the newest stored
    snapshot), or with `stored` on the newest stored snapshot (compared with the one before). Without a
    policy it still shows the listing (no decisions); a fetch that fails is the outcome's `problem`."""
    return _tick(setup, now or dt.datetime.now(dt.UTC), write=False, stored=stored)


def _tick(setup: WatchSetup, now: dt.datetime, write: bool, stored: bool = False) -> TickOutcome:
    store = setup.store
    try:
        suites = load_suites(setup.editions_file, setup.discovered_editions_file)
        policy = load_watch_policy(setup.watch_file, suites)
        suite = resolve_suite(policy.suite if policy else None, suites)
        registry = known_models(setup.models_files, setup.catalogue_file)
    except ValueError as error:  # WatchPolicyError, ModelsRegistryError, an unknown suite: file:line
        return TickOutcome(problem=f"nothing changed: {error}")
    if write and policy is None:
        return TickOutcome(
            problem=f"no watch policy at {setup.watch_file} (OABENCH_WATCH_FILE): nothing is registered "
            "or sent; copy watch.example.toml there to start"
        )
    if write and policy and policy.api_key_env and not environment_value(policy.api_key_env):
        return TickOutcome(
            problem=f"nothing changed: {policy.api_key_env} (the policy's api_key_env) is not set in this "
            "process, so no model it takes could run"
        )
    before = stored_snapshots(store, 2 if stored else 1)
    left_out = 0
    try:
        if stored:
            if not before:
                return TickOutcome(problem="no model_catalogue snapshot is stored yet")
            snapshot, before = before[0], before[1:]
        elif write:
            snapshot, left_out = take_snapshot(store, setup.catalogue_url, setup.timeout_s)
        else:
            from oabench_pipeline.catalogue.client import fetch_listing  # httpx: only when fetching

            listing = fetch_listing(setup.catalogue_url, setup.timeout_s)
            snapshot, left_out = snapshot_of(listing), listing.left_out
    except CatalogueFetchError as error:
        return TickOutcome(
            problem=f"{error}; the last snapshot and every table are unchanged", fetch_failed=True
        )
    ingested = set(store.partitions("questions"))
    editions = [str(e) for e in suite.editions if str(e) in ingested]
    automatic = automatic_models(setup.models_files, setup.catalogue_file)
    budget = month_budget(store, automatic, policy, catalogue_prices(store), now)
    outcome = TickOutcome(
        snapshot=snapshot,
        previous=before[0] if before else None,
        left_out=left_out,
        suite=suite.name,
        editions=editions,
        budget=budget,
        policy=policy,
    )
    if policy is None:
        return outcome
    previous = store.read("catalogue_decisions")
    context = Context(
        policy=policy,
        registry_keys={m.key for m in registry},
        suite=suite.name,
        editions=tuple(int(e) for e in editions),
        budget_left_usd=budget.left_usd,
        today=now.date(),
        entries=lambda row: entries_for(row, policy.protocols, policy),
        estimate=suite_estimator(store, editions),
    )
    outcome.decisions = decide(
        snapshot.frame.to_dicts(),
        latest_decisions(previous.to_dicts() if not previous.is_empty() else []),
        context,
    )
    if write:
        outcome.registered = _register(setup, snapshot, outcome.decisions, policy)
        _record_decisions(store, outcome.decisions, snapshot, suite.name, editions, policy, now)
    return outcome


def suite_estimator(
    store: Warehouse, editions: Sequence[str]
) -> Callable[[Mapping[str, Any], list[ModelConfig]], float | None]:
    """The cost of a model on the suite's editions: the dry run's estimate (prompt tokens from the prompts'
    length × the catalogue's prompt price, plus its per-request price), every protocol; None: no price."""
    questions = {e: store.read("questions", e) for e in editions}

    @cache
    def requests_of(protocol: Protocol) -> list[ChatRequest]:
        # The estimate counts the messages' text only: one probe entry per protocol prices every model.
        probe = ModelConfig.model_validate({"id": "catalogue/estimate", "protocol": protocol})
        return [r for e in editions for r in build_requests(probe, questions[e])]

    def estimate(row: Mapping[str, Any], entries: list[ModelConfig]) -> float | None:
        prompt = row.get("prompt_usd_per_mtok")
        if prompt is None:
            return None
        per_request = row.get("request_usd") or 0.0
        return sum(cost_at(requests_of(e.protocol), prompt / 1e6, per_request) for e in entries)

    return estimate


def _register(
    setup: WatchSetup, snapshot: Snapshot, decisions: list[Decision], policy: WatchPolicy
) -> list[ModelConfig]:
    """Append the taken models' entries to the generated file; the entries as the registry reads them."""
    rows = {row["model"]: row for row in snapshot.frame.to_dicts()}
    taken = [d for d in decisions if d.outcome == "registered"]
    if not taken:
        return []
    tables = [entry_table(rows[d.model], p, policy) for d in taken for p in policy.protocols]
    append_registry_entries(setup.catalogue_file, tables, CATALOGUE_MODELS_HEADER)
    keys = {k for d in taken for k in d.model_keys}
    return [m for m in load_models_registry(setup.catalogue_file) if m.key in keys]


def _record_decisions(
    store: Warehouse,
    decisions: list[Decision],
    snapshot: Snapshot,
    suite: str,
    editions: list[str],
    policy: WatchPolicy,
    now: dt.datetime,
) -> None:
    if not decisions:
        return
    frame = pl.DataFrame(
        [
            {
                "decided_at": now,
                "snapshot_fetched_at": snapshot.fetched_at,
                "model": d.model,
                "outcome": d.outcome,
                "reason": d.reason,
                "detail": d.detail,
                "model_keys": list(d.model_keys),
                "suite": suite,
                "editions": [int(e) for e in editions] if d.outcome == "registered" else [],
                "estimated_cost_usd": d.estimated_cost_usd,
                "budget_left_usd": d.budget_left_usd,
                "policy_sha256": policy.decision_sha256,
                "listing_sha256": d.listing_sha256,
            }
            for d in decisions
        ],
        infer_schema_length=None,
    )
    store.write_partition("catalogue_decisions", frame, now.strftime(STAMP_FORMAT))


def pending_automatic_cells(setup: WatchSetup) -> list[tuple[ModelConfig, str]]:
    """The cells the policy registered (this tick or an earlier one) that are not answered and scored yet,
    on the editions their decision recorded; retired models and hand-written overrides left out."""
    store = setup.store
    automatic = {m.key: m for m in automatic_models(setup.models_files, setup.catalogue_file)}
    decisions = store.read("catalogue_decisions")
    if decisions.is_empty() or not automatic:
        return []
    retired = retired_models(store)
    cells: dict[tuple[str, str], tuple[ModelConfig, str]] = {}
    for row in decisions.filter(pl.col("outcome") == "registered").iter_rows(named=True):
        for key in row["model_keys"]:
            model = automatic.get(key)
            if model is None or model.id in retired:
                continue
            for edition in map(str, row["editions"]):
                if not (
                    inferences_are_current(store, model, edition) and scores_are_current(store, key, edition)
                ):
                    cells[(key, edition)] = (model, edition)
    return list(cells.values())

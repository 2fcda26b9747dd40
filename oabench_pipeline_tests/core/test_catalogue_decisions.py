"""Which catalogue models the policy takes, why the others are skipped, and when a model is decided again."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from oabench_pipeline.catalogue.decisions import Context, Decision, decide, latest_decisions
from oabench_pipeline.catalogue.listing import listing_rows
from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.core.watch_policy import WatchPolicy
from oabench_pipeline_tests.servers.catalogue import catalogue_model

TODAY = dt.date(2026, 5, 10)
D = dt.datetime
POLICY = WatchPolicy.model_validate(
    {
        "include": ["acme/"],
        "created_after": dt.date(2026, 1, 1),
        "max_run_cost_usd": 1.0,
        "monthly_budget_usd": 1.5,
    }
)


def rows(*models: dict[str, Any]) -> list[dict[str, Any]]:
    return listing_rows({"data": list(models)})[0]


def context(
    policy: WatchPolicy = POLICY, left: float = 1.5, registry: tuple[str, ...] = (), editions=(45,)
) -> Context:
    def entries(row: Mapping[str, Any]) -> list[ModelConfig]:
        return [ModelConfig.model_validate({"id": row["model"], "protocol": p}) for p in policy.protocols]

    def estimate(row: Mapping[str, Any], entries: list[ModelConfig]) -> float | None:
        price = row["prompt_usd_per_mtok"]  # 1 $/Mtok ≈ $0.10 on the suite in these tests
        return None if price is None else price / 10 * len(entries)

    return Context(policy, set(registry), "oabench-2026", tuple(editions), left, TODAY, entries, estimate)


def recorded(decisions: list[Decision], policy: WatchPolicy = POLICY, at: int = 0) -> list[dict[str, Any]]:
    """The decisions as `catalogue_decisions` rows."""
    return [
        {
            "decided_at": D(2026, 5, 1, tzinfo=dt.UTC) + dt.timedelta(hours=at),
            "model": d.model,
            "outcome": d.outcome,
            "reason": d.reason,
            "policy_sha256": policy.decision_sha256,
            "listing_sha256": d.listing_sha256,
        }
        for d in decisions
    ]


LISTING = rows(
    catalogue_model("acme/fit", D(2026, 3, 1), prompt="0.000001"),
    catalogue_model("acme/pricey", D(2026, 3, 2), prompt="0.0001"),
    catalogue_model("acme/painter", D(2026, 3, 3), inputs=("image",), outputs=("image",)),
    catalogue_model("acme/old", D(2025, 6, 1)),
    catalogue_model("other/fit", D(2026, 3, 4)),
    catalogue_model("acme/gone", D(2026, 3, 5), expiration_date="2026-05-10"),
    catalogue_model("acme/auto", D(2026, 3, 6), prompt="-1"),
)


def test_each_model_gets_the_first_reason_that_applies() -> None:
    decisions = {d.model: d for d in decide(LISTING, {}, context())}
    assert {m: (d.outcome, d.reason) for m, d in decisions.items()} == {
        "acme/fit": ("registered", "fits"),
        "acme/pricey": ("skipped", "price"),
        "acme/painter": ("skipped", "modality"),
        "acme/old": ("skipped", "policy"),
        "other/fit": ("skipped", "policy"),
        "acme/gone": ("skipped", "retired"),
        "acme/auto": ("skipped", "price"),
    }
    assert decisions["acme/fit"].model_keys == ("acme/fit",)  # the direct protocol's key is the id itself
    assert "created 2025-06-01, not after created_after 2026-01-01" in decisions["acme/old"].detail
    assert "over max_run_cost_usd $1" in decisions["acme/pricey"].detail
    assert "no usable prompt price" in decisions["acme/auto"].detail


def test_the_budget_goes_first_come_first_served_and_a_short_one_is_decided_again_when_it_suffices() -> None:
    listing = rows(
        catalogue_model("acme/first", D(2026, 3, 1), prompt="0.000008"),  # $0.80
        catalogue_model("acme/second", D(2026, 3, 2), prompt="0.000008"),  # $0.80: only $0.70 left
    )
    first = decide(listing, {}, context(left=1.5))
    assert [(d.model, d.reason) for d in first] == [("acme/first", "fits"), ("acme/second", "budget")]
    assert "over the $0.7000 left of this month's budget" in first[1].detail
    previous = latest_decisions(recorded(first))
    assert decide(listing, previous, context(left=0.7)) == []  # still short: nothing new to record
    [again] = decide(listing, previous, context(left=0.9))  # a new month, or a model spent less than thought
    assert (again.model, again.outcome, again.budget_left_usd) == ("acme/second", "registered", 0.9)


def test_a_policy_skip_waits_for_a_new_policy_or_listing_and_a_registered_model_is_never_decided_again() -> (
    None
):
    first = decide(LISTING, {}, context())
    previous = latest_decisions(recorded(first))
    assert decide(LISTING, previous, context()) == []  # the same listing, the same policy: nothing
    wider = WatchPolicy.model_validate({**POLICY.model_dump(), "include": ["acme/", "other/"]})
    # Every skip is decided again under the new policy, oldest first; acme/fit, registered, is not.
    assert [d.model for d in decide(LISTING, previous, context(wider))] == [
        "acme/old",
        "acme/pricey",
        "acme/painter",
        "other/fit",
        "acme/gone",
        "acme/auto",
    ]
    cheaper = [dict(r, prompt_usd_per_mtok=5.0) if r["model"] == "acme/pricey" else r for r in LISTING]
    [repriced] = decide(cheaper, previous, context())
    assert (repriced.model, repriced.outcome) == ("acme/pricey", "registered")


def test_keys_in_the_registry_are_skipped_and_no_ingested_edition_waits() -> None:
    listing = rows(catalogue_model("acme/fit", D(2026, 3, 1)))
    [hand_written] = decide(listing, {}, context(registry=("acme/fit",)))
    assert (hand_written.reason, hand_written.detail) == (
        "registry",
        "already in the models registry as acme/fit",
    )
    [waiting] = decide(listing, {}, context(editions=()))
    assert waiting.reason == "suite"
    [ready] = decide(listing, latest_decisions(recorded([waiting])), context())  # an edition was ingested
    assert ready.outcome == "registered"


def test_two_protocols_make_two_keys_and_cost_both() -> None:
    both = WatchPolicy.model_validate({**POLICY.model_dump(), "protocols": ["direto", "deliberativo"]})
    [decision] = decide(rows(catalogue_model("acme/fit", D(2026, 3, 1))), {}, context(both))
    assert decision.model_keys == ("acme/fit", "acme/fit:deliberativo")
    assert decision.estimated_cost_usd == 0.2

"""What the shipped example watch policy (`watch.example.toml`) would spend on the OABench study's 11
configurations, at the prices the study recorded, measured through `oabench catalogue --format json`.

A loopback catalogue lists the study's 11 model ids as if they had just appeared (created the day after
the policy's `created_after`), each with the prompt and completion price its published run recorded
(`../shared/oab/published-runs/*/summary.json`: four of the eleven; the others are listed with no price,
which the policy skips as `price`). The registry holds only the offline baselines, so every one of the 11
needs a decision. The real `oabench catalogue` then says, per model, what the policy would do and the
estimated cost on its suite (prompt tokens × price, the `--dry-run` estimate); this script sets those
beside what the published run reported (or estimated, for runs that reported no cost) and prints the
totals. Nothing is sent to any model.

Run: .venv/bin/python benchmarks/catalogue_example_policy.py
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from oabench_pipeline.core.editions import format_editions, load_suites, resolve_suite
from oabench_pipeline.core.models_registry import load_models_registry
from oabench_pipeline.core.watch_policy import load_watch_policy
from oabench_pipeline_tests.conftest import REPO_ROOT, shared_oab_dir
from oabench_pipeline_tests.pipeline_env import write_models_file
from oabench_pipeline_tests.servers.catalogue import CatalogueServer, catalogue_model

OABENCH = str(Path(sys.executable).with_name("oabench"))
STUDY_REGISTRY = REPO_ROOT / "oabench_pipeline" / "registry" / "models.toml"
EXAMPLE_POLICY = REPO_ROOT / "watch.example.toml"


def recorded_prices(published: Path) -> dict[str, dict]:
    """Model id → its published run's price snapshot and what the run cost (reported, else estimated)."""
    found = {}
    for path in sorted(published.glob("*/summary.json")):
        summary = json.loads(path.read_text(encoding="utf-8"))
        pricing, cost = summary["pricing"], summary["cost"]
        reported = cost.get("actualCostUsd")
        found[summary["model"]] = {
            "prompt": pricing["promptPricePerToken"],
            "completion": pricing["completionPricePerToken"],
            "run_cost": reported if reported is not None else pricing["estimatedCostUsd"],
            "run_cost_kind": "reported" if reported is not None else "estimated",
            "prompt_tokens": cost["totalPromptTokens"],
        }
    return found


def listing(study_ids: list[str], prices: dict[str, dict], created: dt.datetime) -> list[dict]:
    models = []
    for model_id in study_ids:
        price = prices.get(model_id)
        entry = catalogue_model(
            model_id,
            created,
            prompt=f"{price['prompt']:.12f}" if price else "",
            completion=f"{price['completion']:.12f}" if price else "",
        )
        if price is None:
            del entry["pricing"]  # not recorded by the study: no price to list
        models.append(entry)
    return models


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([OABENCH, *args], env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(
            f"`oabench {' '.join(args)}` failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result


def main() -> None:
    policy = load_watch_policy(EXAMPLE_POLICY)
    assert policy is not None and policy.created_after is not None
    study_ids = list(dict.fromkeys(m.id for m in load_models_registry(STUDY_REGISTRY) if m.kind == "api"))
    prices = recorded_prices(shared_oab_dir() / "published-runs")
    created = dt.datetime.combine(policy.created_after + dt.timedelta(days=1), dt.time(12))
    with (
        tempfile.TemporaryDirectory(prefix="oabench-catalogue-") as tmp,
        CatalogueServer(models=listing(study_ids, prices, created)) as catalogue,
    ):
        root = Path(tmp)
        env = {
            **os.environ,
            "OABENCH_WAREHOUSE": str(root / "warehouse" / "oabench.duckdb"),
            "DAGSTER_HOME": str(root / "dagster_home"),
            "OABENCH_SOURCE_BASE_URL": str(shared_oab_dir() / "mirror"),
            "OABENCH_MODELS_FILE": str(
                write_models_file(root / "models.toml", [{"id": "baseline/random", "kind": "baseline"}])
            ),
            "OABENCH_CATALOGUE_URL": catalogue.url,
            "OABENCH_WATCH_FILE": str(EXAMPLE_POLICY),
        }
        # The suite's editions only: the estimate is on them (every edition would take minutes, for nothing).
        suite = resolve_suite(policy.suite, load_suites())
        run(["ingest", "--editions", format_editions(suite.editions)], env)
        preview = json.loads(run(["catalogue", "--format", "json"], env).stdout)
    print(
        f"example policy {EXAMPLE_POLICY.name}: suite {preview['suite']} (editions {preview['editions']}), "
        f"max_run_cost_usd ${policy.max_run_cost_usd:g}, monthly_budget_usd ${policy.monthly_budget_usd:g}"
    )
    print(
        f"  include {', '.join(policy.include)}; exclude {', '.join(policy.exclude) or 'none'}; created_after "
        f"{policy.created_after}; protocols {', '.join(policy.protocols)}; {policy.base_url} "
        f"(key ${policy.api_key_env}), concurrency {policy.concurrency}"
    )
    print(f"\n{'model':<38} {'decision':<16} {'estimate $':>10} {'study run $':>12} {'estimate/run':>12}")
    would_spend = run_total = 0.0
    for decision in preview["decisions"]:
        model, estimate = decision["model"], decision["estimated_cost_usd"]
        price = prices.get(model)
        verdict = "registered" if decision["outcome"] == "registered" else f"skip: {decision['reason']}"
        study = f"{price['run_cost']:.4f} {price['run_cost_kind'][:3]}" if price else "—"
        ratio = f"{estimate / price['run_cost']:.2f}" if price and estimate else "—"
        shown = f"{estimate:.4f}" if estimate is not None else "—"
        print(f"{model:<38} {verdict:<16} {shown:>10} {study:>12} {ratio:>12}")
        if decision["outcome"] == "registered":
            would_spend += estimate
            run_total += price["run_cost"] if price else 0.0
    registered = sum(d["outcome"] == "registered" for d in preview["decisions"])
    print(
        f"\nwould register {registered} of {len(study_ids)}: estimated ${would_spend:.4f} "
        f"(ratio to monthly_budget_usd {would_spend / policy.monthly_budget_usd:.3f}); their study runs cost "
        f"${run_total:.4f} (estimate ÷ study = {would_spend / run_total:.2f})"
        if run_total
        else ""
    )
    unpriced = [m for m in study_ids if m not in prices]
    print(f"no price recorded by the study for {len(unpriced)}: {', '.join(unpriced)}")


if __name__ == "__main__":
    main()

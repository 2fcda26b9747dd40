"""The watch policy: its fields and defaults, and every mistake as `file:line: field 'x': problem`."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from oabench_pipeline.core.watch_policy import WatchPolicyError, load_watch_policy, parse_watch_policy
from oabench_pipeline_tests.conftest import REPO_ROOT

GOOD = """\
# the owner's policy
[watch]
include = ["openai/", "anthropic/"]
exclude = ["openai/gpt-5-pro"]
created_after = 2026-01-01
suite = "oabench-2026"
protocols = ["direto", "deliberativo"]
max_run_cost_usd = 5.0
monthly_budget_usd = 20
api_key_env = ""
concurrency = 8
"""
SUITES = ["oabench-2026", "all"]
PATH = Path("watch.toml")


def test_a_policy_with_every_field() -> None:
    policy = parse_watch_policy(GOOD, PATH, SUITES)
    assert policy.includes("openai/gpt-6") and not policy.includes("google/gemini-4")
    assert policy.created_after == dt.date(2026, 1, 1)
    assert policy.protocols == ("direto", "deliberativo")
    assert policy.monthly_budget_usd == 20  # a TOML integer is a fine number of dollars
    assert policy.api_key_env is None  # "" means send no key, as in the models registry
    assert policy.base_url == "https://openrouter.ai/api/v1"


def test_defaults_take_every_id_with_the_default_suite_and_the_direct_protocol() -> None:
    policy = parse_watch_policy("[watch]\nmax_run_cost_usd = 1.0\nmonthly_budget_usd = 2.0\n", PATH)
    assert policy.includes("anyone/anything") and policy.suite is None and policy.protocols == ("direto",)
    assert policy.api_key_env == "OPENROUTER_API_KEY" and policy.concurrency == 20


def test_the_decision_fingerprint_ignores_the_budget_and_the_endpoint() -> None:
    policy = parse_watch_policy(GOOD, PATH)
    richer = parse_watch_policy(GOOD.replace("= 20\n", "= 200\n").replace("= 8\n", "= 2\n"), PATH)
    narrower = parse_watch_policy(GOOD.replace('"anthropic/"', '"x-ai/"'), PATH)
    assert policy.decision_sha256 == richer.decision_sha256 != narrower.decision_sha256


@pytest.mark.parametrize(
    ("text", "line", "field", "problem"),
    [
        (
            GOOD.replace("max_run_cost_usd = 5.0", 'max_run_cost_usd = "5"'),
            8,
            "max_run_cost_usd",
            "valid number",
        ),
        (
            GOOD.replace("max_run_cost_usd = 5.0", "max_run_cost_usd = -5.0"),
            8,
            "max_run_cost_usd",
            "greater than 0",
        ),
        (GOOD.replace("max_run_cost_usd = 5.0\n", ""), 2, "max_run_cost_usd", "Field required"),
        (GOOD + "budget = 3\n", 12, "budget", "Extra inputs are not permitted"),
        (GOOD.replace('"direto", "deliberativo"', '"direto", "direto"'), 7, "protocols", "twice"),
        (GOOD.replace('"direto", "deliberativo"', '"chatty"'), 7, "protocols", "'direto' or 'deliberativo'"),
        (GOOD.replace("concurrency = 8", "concurrency = 0"), 11, "concurrency", "greater than or equal to 1"),
        (GOOD + 'base_url = "ftp://x"\n', 12, "base_url", "http:// or https://"),
        (GOOD + 'base_url = "http://169.254.169.254/v1"\n', 12, "base_url", "link-local"),
        (GOOD.replace("created_after = 2026-01-01", 'created_after = "2026"'), 5, "created_after", "date"),
        (
            GOOD.replace('suite = "oabench-2026"', 'suite = "oabench-2099"'),
            6,
            "suite",
            "unknown suite 'oabench-2099'",
        ),
        (GOOD.replace("[watch]", "[policy]"), 2, "policy", "only a [watch] table"),
        (GOOD.replace("concurrency = 8", "concurrency = "), 11, "concurrency", "TOML syntax error"),
        (GOOD + f"deep = {'[' * 5000}{']' * 5000}\n", 12, "deep", "TOML nested too deep to read"),
    ],
)
def test_every_mistake_names_its_line_and_field(text: str, line: int, field: str, problem: str) -> None:
    with pytest.raises(WatchPolicyError) as raised:
        parse_watch_policy(text, PATH, SUITES)
    error = raised.value
    assert (error.line, error.field) == (line, field), str(error)
    assert problem in str(error) and str(error).startswith(f"watch.toml:{line}: field '{field}':")


def test_no_file_is_no_policy_and_the_shipped_example_is_valid(tmp_path: Path) -> None:
    assert load_watch_policy(tmp_path / "watch.toml") is None
    example = load_watch_policy(REPO_ROOT / "watch.example.toml", SUITES)
    assert example is not None and example.monthly_budget_usd > 0

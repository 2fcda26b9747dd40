"""What automatic runs spent, from real response logs: reported cost, else tokens × the listed price; per
calendar month; and the two limits an automatic cell run is held to."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

from oabench_pipeline.core.tables import conform
from oabench_pipeline.inference.catalogue_store import Price, catalogue_prices
from oabench_pipeline.inference.cost import answer_cost
from oabench_pipeline.inference.response_log import ResponseLog, cell_log_path
from oabench_pipeline.inference.spend import AutomaticBudget, keys_spend
from oabench_pipeline.inference.types import ChatResult
from oabench_pipeline.warehouse import Warehouse

MAY = dt.datetime(2026, 5, 20, tzinfo=dt.UTC)
APRIL = dt.datetime(2026, 4, 30, 23, 59, tzinfo=dt.UTC)
PRICES = {"acme/a": Price(prompt=1e-6, completion=2e-6), "acme/b": Price(prompt=None, completion=None)}


def result(qid: str, at: dt.datetime, cost: float | None, prompt_tokens: int | None = 1000) -> ChatResult:
    return ChatResult(
        qid=qid, request_hash=f"h-{qid}", raw_response="A", reasoning=None, latency_ms=10,
        prompt_tokens=prompt_tokens, completion_tokens=10, reasoning_tokens=None, cost_usd=cost, error=None,
        attempts=1, finished_at=at, total_cost_usd=cost,
    )  # fmt: skip


def write_log(root: Path, key: str, edition: str, results: list[ChatResult]) -> Path:
    path = cell_log_path(root, key, edition)
    with ResponseLog(path) as log:
        for item in results:
            log.append(item)
    return path


def test_reported_cost_else_tokens_times_price_else_nothing() -> None:
    assert answer_cost(result("q1", MAY, 0.25), PRICES["acme/a"]) == (0.25, True)
    assert answer_cost(result("q1", MAY, None), PRICES["acme/a"]) == (1000 * 1e-6 + 10 * 2e-6, False)
    assert answer_cost(result("q1", MAY, None), PRICES["acme/b"]) == (0.0, False)
    assert answer_cost(result("q1", MAY, None, prompt_tokens=None), PRICES["acme/a"]) == (0.0, False)


def test_spend_per_month_and_per_model(tmp_path: Path) -> None:
    write_log(
        tmp_path, "acme/a", "44", [result("q1", APRIL, 1.0), result("q2", MAY, 0.5), result("q3", MAY, None)]
    )
    write_log(tmp_path, "acme/a", "45", [result("q4", MAY, 0.25)])
    write_log(tmp_path, "acme/b", "45", [result("q5", MAY, 2.0)])
    may = keys_spend(tmp_path, {"acme/a": "acme/a", "acme/b": "acme/b"}, PRICES, "2026-05")
    assert (may.reported_usd, round(may.estimated_usd, 6)) == (2.75, 0.00102)
    assert keys_spend(tmp_path, {"acme/a": "acme/a"}, PRICES).reported_usd == 1.75  # all time


def test_a_reply_with_no_reported_cost_is_priced_as_listed_when_it_arrived(tmp_path: Path) -> None:
    """A later price change (a cut, say) does not rewrite what a month spent: that would free budget
    already paid for."""
    warehouse = Warehouse(tmp_path / "warehouse" / "oabench.duckdb")
    for day, prompt in [(1, 2.0), (10, 2.0), (21, 0.5), (25, 0.5)]:  # $ per Mtok; cut on the 21st
        fetched = dt.datetime(2026, 5, day, 6, tzinfo=dt.UTC)
        listing = [{"model": "acme/a", "prompt_usd_per_mtok": prompt, "completion_usd_per_mtok": 2 * prompt}]
        frame = pl.DataFrame(listing).with_columns(fetched_at=pl.lit(fetched), catalogue_url=pl.lit("x"))
        warehouse.write_partition("model_catalogue", conform("model_catalogue", frame), f"2026-05-{day:02}")
    price = catalogue_prices(warehouse)["acme/a"]
    assert (price.prompt, len(price.listed)) == (0.5e-6, 2)  # the newest; the history keeps the changes only
    write_log(
        tmp_path / "responses",
        "acme/a",
        "45",
        [
            result(
                "q1", dt.datetime(2026, 4, 30, tzinfo=dt.UTC), None
            ),  # before the first listing: its price
            result("q2", MAY, None),  # the 20th: still $2
            result("q3", dt.datetime(2026, 5, 21, 6, tzinfo=dt.UTC), None),  # the cut's snapshot on
        ],
    )
    spend = keys_spend(tmp_path / "responses", {"acme/a": "acme/a"}, {"acme/a": price})
    assert round(spend.estimated_usd, 9) == round(
        2 * (1000 * 2e-6 + 10 * 4e-6) + 1000 * 0.5e-6 + 10 * 1e-6, 9
    )
    assert price.at(None) == price and Price(1e-6, 2e-6).at(MAY) == Price(1e-6, 2e-6)


def test_an_automatic_run_stops_at_the_models_ceiling_and_the_months_budget(tmp_path: Path) -> None:
    now_month = dt.datetime.now(dt.UTC)
    other_cell = write_log(tmp_path, "acme/a", "44", [result("q1", now_month, 0.75)])
    own = cell_log_path(tmp_path, "acme/a", "45")
    write_log(tmp_path, "acme/b", "45", [result("q2", now_month, 1.0)])

    def budget(ceiling: float, monthly: float) -> AutomaticBudget:
        guard = AutomaticBudget(
            responses_root=tmp_path, own_log=own, model_id="acme/a", model_keys={"acme/a": "acme/a"},
            automatic_keys={"acme/a": "acme/a", "acme/b": "acme/b"}, prices=PRICES,
            ceiling_usd=ceiling, monthly_budget_usd=monthly,
        )  # fmt: skip
        guard.start()
        return guard

    assert budget(1.0, 10.0).reached(0.2) is None  # 0.75 elsewhere + 0.2 now
    assert "reaching the watch policy's max_run_cost_usd $1" in (budget(1.0, 10.0).reached(0.25) or "")
    assert "monthly_budget_usd $2" in (budget(5.0, 2.0).reached(0.25) or "")  # 0.75 + 1.0 (acme/b) + 0.25
    assert "exceeds the watch policy's max_run_cost_usd" in (budget(1.0, 10.0).would_pass(0.5) or "")
    assert budget(1.0, 10.0).would_pass(0.25) is None
    assert other_cell.is_file() and not own.exists()


def test_cells_sending_in_one_process_see_each_others_spend_at_once(tmp_path: Path) -> None:
    """`oabench run` sends a model's cells at once in threads: each must count the others' running spend
    now, not a second later from their logs (against a fast endpoint every cell would reach the ceiling)."""
    now_month = dt.datetime.now(dt.UTC)
    write_log(tmp_path, "acme/a", "43", [result("q0", now_month, 0.25)])  # paid in an earlier run: on disk
    keys = {"acme/a": "acme/a", "acme/b": "acme/b"}

    def cell(key: str, edition: str) -> AutomaticBudget:
        guard = AutomaticBudget(
            responses_root=tmp_path, own_log=cell_log_path(tmp_path, key, edition), model_id=key,
            model_keys={key: key}, automatic_keys=keys, prices=PRICES, ceiling_usd=1.0, monthly_budget_usd=1.5,
        )  # fmt: skip
        guard.start()
        return guard

    a44, a45, b45 = cell("acme/a", "44"), cell("acme/a", "45"), cell("acme/b", "45")
    with a44.sending(), a45.sending(), b45.sending():
        assert a44.reached(0.5) is None  # 0.25 on disk + 0.5
        assert "max_run_cost_usd $1" in (
            a45.reached(0.25) or ""
        )  # + 0.5 of the sibling cell, not yet on disk
        assert "monthly_budget_usd $1.5" in (b45.reached(0.6) or "")  # 0.25 + 0.5 + 0.25 of acme/a, + 0.6
    assert a45.reached(0.25) is None  # the siblings stopped sending: only what their logs hold counts again


HOLDING_CHILD = """
import sys
from pathlib import Path
from oabench_pipeline.inference.response_log import cell_log_path
from oabench_pipeline.inference.spend import AutomaticBudget

root = Path(sys.argv[1])
budget = AutomaticBudget(
    responses_root=root, own_log=cell_log_path(root, "acme/a", "44"), model_id="acme/a",
    model_keys={"acme/a": "acme/a"}, automatic_keys={"acme/a": "acme/a", "acme/b": "acme/b"}, prices={},
    ceiling_usd=1.0, monthly_budget_usd=1.5,
)
budget.start()
with budget.sending():
    with budget.atomically():
        budget.add(0.75, 0.0)  # a request in flight holds $0.75
    print("holding", flush=True)
    sys.stdin.readline()
"""


def test_what_another_process_holds_counts_until_it_dies(tmp_path: Path) -> None:
    """The daemon runs each cell in its own process: a hold taken there counts here at once, and the
    holds of a process that died (SIGKILL included) count no more."""
    import subprocess
    import sys

    root = tmp_path / "warehouse" / "responses"
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDING_CHILD, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"holding"
        here = AutomaticBudget(
            responses_root=root, own_log=cell_log_path(root, "acme/a", "45"), model_id="acme/a",
            model_keys={"acme/a": "acme/a"}, automatic_keys={"acme/a": "acme/a", "acme/b": "acme/b"},
            prices={}, ceiling_usd=1.0, monthly_budget_usd=1.5,
        )  # fmt: skip
        here.start()
        assert here.holds_elsewhere()
        assert "past the watch policy's max_run_cost_usd $1" in (here.over(0.5) or "")
        assert here.over(0.25) is None
    finally:
        child.kill()
        child.wait()
    assert not here.holds_elsewhere() and here.over(0.5) is None


def test_a_batch_holds_its_worst_case_until_it_is_collected(tmp_path: Path) -> None:
    """A batch is paid when it finishes, hours and processes later: what it reserved before it was sent
    counts against every later check while its lines are in an open batch, and no longer once collected."""
    from oabench_pipeline.inference.batches.journal import BatchJournal, JournalLine
    from oabench_pipeline.inference.spend import batch_holds

    root = tmp_path / "warehouse" / "responses"
    keys = {"acme/a": "acme/a", "acme/b": "acme/b"}

    def cell(key: str) -> AutomaticBudget:
        guard = AutomaticBudget(
            responses_root=root, own_log=cell_log_path(root, key, "45"), model_id=key, model_keys={key: key},
            automatic_keys=keys, prices=PRICES, ceiling_usd=1.0, monthly_budget_usd=1.0,
        )  # fmt: skip
        guard.start()
        return guard

    a45, b45 = cell("acme/a"), cell("acme/b")
    journal = BatchJournal(tmp_path / "batches" / "acme" / "45.jsonl")
    lines = {"h1": 0.3, "h2": 0.3}
    assert a45.reserve_batch(journal.path, lines) is None
    assert "a batch of 1 line(s) may cost up to $0.5000" in (
        a45.reserve_batch(journal.path, {"h3": 0.5}) or ""
    )
    assert "monthly_budget_usd $1" in (b45.over(0.5) or "")  # another model: the month's budget is shared
    a45.settle_batches()  # the round ended before the intent was recorded: nothing was sent, nothing held
    assert batch_holds(root) == {} and b45.over(0.5) is None

    assert a45.reserve_batch(journal.path, lines) is None
    journal.record_intent("t1", "acme/a", [JournalLine(f"c{h}", f"q{h}", h) for h in lines])
    journal.record_submitted("t1", "batch-1")
    a45.settle_batches()  # the round ended with its batch open (a SIGKILL as well): its lines stay held
    assert batch_holds(root) == {cell_log_path(root, "acme/a", "45"): pytest.approx(0.6)}
    assert "monthly_budget_usd $1" in (b45.over(0.5) or "")
    assert a45.reserve_batch(journal.path, lines) is None  # the same lines again are not held twice
    a45.settle_batches()
    journal.record_collected("t1", "batch-1", "completed", ["ch1"], ["ch2"])
    assert batch_holds(root) == {} and b45.over(0.5) is None  # collected: its costs are in the log

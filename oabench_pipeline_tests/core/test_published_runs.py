"""Importing OABench run folders: the real published runs, and the run rules on small synthetic runs."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from oabench_pipeline.core.published_runs import (
    PublishedRunError,
    published_run_dirs,
    read_published_run,
    read_published_runs,
    read_published_summary,
    read_run_summary,
)

PARTIAL_RUN = "2026-03-03T13-41-07-320Z_openai--gpt-5-mini_direto"


@pytest.fixture(scope="module")
def runs_dir(shared_oab: Path) -> Path:
    return shared_oab / "published-runs"


def test_real_runs_are_read_with_registry_keys(runs_dir: Path) -> None:
    records = read_published_runs(runs_dir)
    per_run = Counter(r.run_id for r in records)
    assert len(published_run_dirs(runs_dir)) == 5
    assert per_run[PARTIAL_RUN] == 24
    assert sorted(per_run.values()) == [24, 240, 240, 240, 240]
    # All published runs are direct, no reasoning effort: the key is the bare model id.
    assert all(r.model_key == r.model and r.reasoning_effort is None for r in records)
    assert all(r.run_id.split("_")[1].replace("--", "/") == r.model for r in records)


def test_real_records_keep_recorded_answers_and_metadata(runs_dir: Path) -> None:
    records = read_published_runs(runs_dir)
    assert all(
        (r.answer_strict, r.answer_lenient) == (r.recorded_strict, r.recorded_lenient) for r in records
    )
    full_runs = {r.run_id for r in records} - {PARTIAL_RUN}
    for run_id in full_runs:
        skipped = {r.qid for r in records if r.run_id == run_id and r.skipped}
        assert skipped == {"oab-43-1f-q1", "oab-43-1f-q74"}  # the two annulled questions
    assert all(r.timestamp.tzinfo is not None for r in records)
    haiku = [r for r in records if r.model == "anthropic/claude-haiku-4.5" and not r.skipped]
    assert all(r.cost_usd and r.cost_usd > 0 and r.prompt_tokens for r in haiku)
    assert all(r.reasoning_tokens is None for r in records if r.model == "google/gemini-2.5-flash-lite")
    assert {r.qid.split("-q")[0] for r in records if r.run_id == PARTIAL_RUN} == {"oab-45-1f"}


def test_summaries_exist_only_for_finished_runs(runs_dir: Path) -> None:
    for run_dir in published_run_dirs(runs_dir):
        summary = read_published_summary(run_dir)
        if run_dir.name == PARTIAL_RUN:
            assert summary is None
        else:
            assert summary is not None and summary["runId"] == run_dir.name
            assert summary["aggregate"]["totalQuestions"] == 240


def test_each_folder_is_one_run_named_after_it(runs_dir: Path) -> None:
    records = read_published_runs(runs_dir)
    assert {r.run_id for r in records} == {d.name for d in published_run_dirs(runs_dir)}
    assert len({(r.run_id, r.qid) for r in records}) == len(records)


def test_run_summaries_say_which_editions_completed_and_at_what_price(runs_dir: Path) -> None:
    partial = read_run_summary(runs_dir / PARTIAL_RUN)
    assert (partial.has_summary, partial.editions, partial.completed_at) == (False, [], None)
    grok = read_run_summary(runs_dir / "2026-03-03T18-05-25-435Z_x-ai--grok-4.1-fast_direto")
    assert grok.has_summary and grok.editions == [43, 44, 45]
    assert (
        grok.completed_at is not None and grok.completed_at.isoformat() == "2026-03-03T18:10:20.395000+00:00"
    )
    assert (grok.prompt_price_per_token, grok.completion_price_per_token) == (2e-07, 5e-07)
    assert grok.estimated_cost_usd == pytest.approx(0.1897627)


# ---- synthetic run folders, shaped from a real line ----


@pytest.fixture(scope="module")
def real_line(runs_dir: Path) -> dict[str, Any]:
    lines = (runs_dir / PARTIAL_RUN / "inferences.jsonl").read_text(encoding="utf-8").splitlines()
    return json.loads(lines[0])


def _write_run(
    root: Path,
    run_id: str,
    lines: list[dict[str, Any]],
    model: str = "openai/gpt-5-mini",
    protocol: str = "direto",
    effort: str | None = None,
) -> Path:
    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    config: dict[str, Any] = {"runId": run_id, "model": model, "protocol": protocol, "reasoningMode": "none"}
    if effort is not None:
        config["reasoningEffort"] = effort
    (run_dir / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (run_dir / "inferences.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8"
    )
    return run_dir


def _line(template: dict[str, Any], number: int, answer: str, timestamp: str) -> dict[str, Any]:
    return {
        **template,
        "qid": f"oab-45-1f-q{number}",
        "questionNumber": number,
        "rawResponse": answer,
        "parsedAnswer": {"strict": answer or None, "lenient": answer or None},
        "timestamp": timestamp,
    }


def test_runs_are_kept_apart_not_merged(tmp_path: Path, real_line: dict[str, Any]) -> None:
    # A later run answering the same questions is another run: nothing of run-1 is replaced.
    _write_run(
        tmp_path,
        "run-1",
        [_line(real_line, 1, "A", "2026-03-03T10:00:00Z"), _line(real_line, 2, "A", "2026-03-03T12:00:00Z")],
    )
    _write_run(
        tmp_path,
        "run-2",
        [_line(real_line, 1, "B", "2026-03-03T11:00:00Z"), _line(real_line, 2, "B", "2026-03-03T11:00:00Z")],
    )
    records = read_published_runs(tmp_path)
    assert sorted((r.run_id, r.number, r.answer_lenient) for r in records) == [
        ("run-1", 1, "A"),
        ("run-1", 2, "A"),
        ("run-2", 1, "B"),
        ("run-2", 2, "B"),
    ]


def test_last_line_wins_within_a_resumed_run(tmp_path: Path, real_line: dict[str, Any]) -> None:
    run_dir = _write_run(
        tmp_path,
        "resumed",
        [
            _line(real_line, 1, "", "2026-03-03T10:00:00Z"),
            _line(real_line, 2, "C", "2026-03-03T10:00:01Z"),
            _line(real_line, 1, "D", "2026-03-03T10:05:00Z"),
        ],
    )
    records = read_published_run(run_dir)
    assert [(r.number, r.answer_lenient) for r in records] == [(2, "C"), (1, "D")]


def test_keys_follow_the_registry_rule_and_keep_configs_apart(
    tmp_path: Path, real_line: dict[str, Any]
) -> None:
    line = [_line(real_line, 1, "A", "2026-03-03T10:00:00Z")]
    _write_run(tmp_path, "plain", line, model="openai/gpt-5.2", effort="none")
    _write_run(tmp_path, "medium", line, model="openai/gpt-5.2", effort="medium")
    _write_run(tmp_path, "delib", line, model="openai/gpt-5.2", protocol="deliberativo", effort="high")
    records = read_published_runs(tmp_path)
    assert sorted(r.model_key for r in records) == [
        "openai/gpt-5.2",
        "openai/gpt-5.2:reasoning-high:deliberativo",
        "openai/gpt-5.2:reasoning-medium",
    ]


def test_reparsing_exposes_answers_the_tool_recorded_differently(
    tmp_path: Path, real_line: dict[str, Any]
) -> None:
    line = {
        **_line(real_line, 1, "A", "2026-03-03T10:00:00Z"),
        "parsedAnswer": {"strict": None, "lenient": "B"},
    }
    (record,) = read_published_run(_write_run(tmp_path, "odd", [line]))
    assert (record.answer_strict, record.answer_lenient) == ("A", "A")
    assert (record.recorded_strict, record.recorded_lenient) == (None, "B")


def test_torn_last_line_is_dropped_but_a_bad_middle_line_raises(
    tmp_path: Path, real_line: dict[str, Any]
) -> None:
    run_dir = _write_run(tmp_path, "torn", [_line(real_line, 1, "A", "2026-03-03T10:00:00Z")])
    inferences = run_dir / "inferences.jsonl"
    inferences.write_text(inferences.read_text() + '{"qid":"oab-45-1f-q2","edi', encoding="utf-8")
    assert [r.number for r in read_published_run(run_dir)] == [1]
    inferences.write_text('{"qid": 3}\n' + inferences.read_text(), encoding="utf-8")
    with pytest.raises(PublishedRunError, match=r"inferences\.jsonl:1"):
        read_published_run(run_dir)

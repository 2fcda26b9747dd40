"""The per-cell response log: durable appends, torn lines, and which result counts per request."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from oabench_pipeline.core.provenance import PROVENANCE_COLUMNS, Provenance
from oabench_pipeline.inference.log_records import inspect_log
from oabench_pipeline.inference.response_log import (
    ResponseLog,
    cell_log_path,
    latest_by_hash,
    read_log,
    repair,
)
from oabench_pipeline.inference.types import ChatResult

T0 = dt.datetime(2026, 3, 3, 12, 0, tzinfo=dt.UTC)


def result(
    request_hash: str, answer: str | None = "B", error: str | None = None, minute: int = 0
) -> ChatResult:
    return ChatResult(
        qid=f"q-{request_hash}",
        request_hash=request_hash,
        raw_response=answer,
        reasoning=None,
        latency_ms=120,
        prompt_tokens=900,
        completion_tokens=1,
        reasoning_tokens=0,
        cost_usd=0.25,
        error=error,
        attempts=1,
        finished_at=T0 + dt.timedelta(minutes=minute),
        total_cost_usd=0.25,
    )


def test_appended_results_read_back_equal(tmp_path: Path) -> None:
    path = cell_log_path(tmp_path, "x/y:reasoning-high", "45")
    written = [
        result("h1"),
        result("h2", answer=None, error="HTTP 400: too long"),
        result("h3", "Resposta: ç"),
    ]
    with ResponseLog(path) as log:
        for item in written:
            log.append(item)
    assert read_log(path) == written


def test_model_key_with_slashes_and_quotes_stays_inside_the_root(tmp_path: Path) -> None:
    path = cell_log_path(tmp_path, "../evil'; drop/ módulo", "45")
    assert path.parent.parent == tmp_path
    assert path.name == "45.jsonl"


def test_missing_log_reads_empty(tmp_path: Path) -> None:
    assert read_log(tmp_path / "nothing.jsonl") == []


def test_torn_last_line_is_ignored_and_next_append_starts_a_fresh_line(tmp_path: Path) -> None:
    path = tmp_path / "cell.jsonl"
    with ResponseLog(path) as log:
        log.append(result("h1"))
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"qid": "q-h2", "request_hash": "h2", "raw_resp')  # a crash mid-write
    assert [r.request_hash for r in read_log(path)] == ["h1"]

    with ResponseLog(path) as log:
        log.append(result("h3"))
    assert [r.request_hash for r in read_log(path)] == ["h1", "h3"]
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and lines[1].startswith('{"qid": "q-h2"')


def test_garbage_bytes_in_the_log_do_not_hide_good_records(tmp_path: Path) -> None:
    path = tmp_path / "cell.jsonl"
    with ResponseLog(path) as log:
        log.append(result("h1"))
    with path.open("ab") as handle:
        handle.write(b"\xff\xfe not json\n")
    with ResponseLog(path) as log:
        log.append(result("h2"))
    assert [r.request_hash for r in read_log(path)] == ["h1", "h2"]


def test_success_wins_over_errors_before_and_after_it() -> None:
    ok = result("h1", minute=1)
    history = [
        result("h1", answer=None, error="HTTP 503", minute=0),
        ok,
        result("h1", answer=None, error="gave up after 7 attempts", minute=2),
    ]
    assert latest_by_hash(history) == {"h1": ok}


def test_latest_wins_among_equals() -> None:
    first_error = result("h1", answer=None, error="HTTP 503", minute=0)
    last_error = result("h1", answer=None, error="timeout", minute=1)
    assert latest_by_hash([first_error, last_error])["h1"] == last_error
    first_ok, last_ok = result("h2", "A", minute=0), result("h2", "C", minute=1)
    assert latest_by_hash([first_ok, last_ok])["h2"] == last_ok


def test_requests_are_kept_apart() -> None:
    best = latest_by_hash([result("h1"), result("h2", answer=None, error="x")])
    assert best["h1"].ok and not best["h2"].ok


def test_lines_from_before_provenance_and_from_newer_versions_both_read(tmp_path: Path) -> None:
    """A log written before the provenance fields existed still resumes; unknown fields are ignored; the
    provenance is written as flat keys, as before it was one `Provenance` value."""
    path = tmp_path / "cell.jsonl"
    old = (
        '{"qid": "q1", "request_hash": "h1", "raw_response": "B", "reasoning": null, "latency_ms": 9, '
        '"prompt_tokens": 1, "completion_tokens": 1, "reasoning_tokens": 0, "cost_usd": 0.1, "error": null, '
        '"attempts": 1, "finished_at": "2026-03-03T12:00:00+00:00", "total_cost_usd": 0.1}'
    )
    newer = old.replace('"h1"', '"h2"').replace("}", ', "a_field_from_the_future": 1}')
    path.write_text(old + "\n" + newer + "\n", encoding="utf-8")
    first, second = read_log(path)
    assert (first.request_hash, first.raw_response, first.provenance) == ("h1", "B", Provenance())
    assert second.request_hash == "h2" and second.ok
    provenance = Provenance(response_id="gen-1", finish_reason="stop", system_fingerprint="fp")
    with ResponseLog(path) as log:
        log.append(ChatResult(**{**first.__dict__, "request_hash": "h3", "provenance": provenance}))
    assert read_log(path)[-1].provenance == provenance
    line = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])
    assert "provenance" not in line
    assert {k: line[k] for k in PROVENANCE_COLUMNS} == provenance.columns()


def test_each_result_counts_as_received_only_once_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    path = tmp_path / "cell.jsonl"
    synced_sizes: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        real_fsync(fd)
        synced_sizes.append(os.fstat(fd).st_size)

    monkeypatch.setattr(os, "fsync", fsync)
    received: list[tuple[str, int]] = []
    with ResponseLog(path, on_durable=lambda r: received.append((r.request_hash, synced_sizes[-1]))) as log:
        for n in range(50):
            log.append(result(f"h{n}"))
    assert [h for h, _ in received] == [f"h{n}" for n in range(50)]
    lines = path.read_bytes().splitlines(keepends=True)
    for index, (_, synced) in enumerate(received):
        assert synced >= sum(len(line) for line in lines[: index + 1]), "reported before its fsync"
    assert log.written == 50 and log.failure is None
    assert not log.reserve_path.exists()


def logged_lines(path: Path, count: int) -> list[str]:
    """A log of `count` answers (h1, h2, ...) written by `ResponseLog`; its lines, to damage."""
    with ResponseLog(path) as log:
        for n in range(1, count + 1):
            log.append(result(f"h{n}"))
    return path.read_text(encoding="utf-8").splitlines()


def test_every_line_is_validated_a_surviving_reply_is_kept_and_the_rest_counts_as_not_answered(
    tmp_path: Path,
) -> None:
    path = tmp_path / "45.jsonl"
    lines = logged_lines(path, 6)
    lines[1] = lines[1].replace('"latency_ms": 120', '"latency_ms": "abc"')
    lines[1] = lines[1].replace('"attempts": 1', '"attempts": -1')
    lines[2] = lines[2].replace('"raw_response": "B"', '"raw_response": {"x": 1}')
    lines[3] = "not json at all"
    lines[4] = "[1, 2]"
    path.write_text("\n".join(lines) + "\n" + lines[5][:30], encoding="utf-8")  # and a torn copy of the last

    contents = inspect_log(path)
    assert [r.request_hash for r in contents.results] == ["h1", "h2", "h6"]
    kept = contents.results[1]
    assert (kept.raw_response, kept.latency_ms, kept.attempts, kept.prompt_tokens) == ("B", None, None, 900)
    described = [line.describe(path) for line in contents.damaged]
    assert described[0] == (
        f"{path}:2: field 'latency_ms': Input should be a valid integer (got 'abc'); field 'attempts': Input "
        "should be greater than or equal to 0 (got -1); the reply is kept, with attempts, latency_ms NULL"
    )
    assert [d.split(": ", 1)[1].split(";")[0] for d in described[1:]] == [
        "field 'raw_response': Input should be a valid string (got {'x': 1})",
        "not valid JSON (Expecting value)", "not a JSON object (a list)",
        "half-written last line (the process was killed while writing it?)",
    ]  # fmt: skip
    unusable = "counted as not answered, asked again once unless another answer to it is kept"
    assert all(d.endswith(unusable) for d in described[1:])


def test_repair_sets_damaged_lines_aside_once_and_keeps_the_salvaged_reply(tmp_path: Path) -> None:
    path = tmp_path / "45.jsonl"
    lines = logged_lines(path, 3)
    lines[0] = lines[0].replace('"latency_ms": 120', '"latency_ms": "abc"')
    lines[1] = lines[1][:-5]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    messages = repair(path)
    assert [m.split(": ")[0] for m in messages] == [f"{path}:1", f"{path}:2"]
    assert all(m.endswith("(set aside in 45.jsonl.damaged)") for m in messages)
    assert [(r.request_hash, r.latency_ms) for r in read_log(path)] == [("h1", None), ("h3", 120)]
    aside = [json.loads(line) for line in (tmp_path / "45.jsonl.damaged").read_text().splitlines()]
    assert [(a["line"], a["salvaged"], a["text"]) for a in aside] == [
        (1, True, lines[0]),
        (2, False, lines[1]),
    ]
    assert repair(path) == [] and len(aside) == 2  # nothing left to set aside the second time


def test_a_line_nested_too_deep_or_with_counts_beyond_int64_is_set_aside_not_fatal(tmp_path: Path) -> None:
    """`[[[[...` thousands deep made Python's decoder raise RecursionError: `oabench status` crashed on every
    cell and the line was never set aside. Counts beyond int64 failed the cell's Parquet write forever."""
    path = tmp_path / "45.jsonl"
    lines = logged_lines(path, 4)
    lines[1] = "[" * 100_000 + "]" * 100_000
    lines[2] = lines[2].replace('"prompt_tokens": 900', '"prompt_tokens": 1' + "0" * 400)
    lines[3] = lines[3].replace('"prompt_tokens": 900', '"prompt_tokens": -900')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    contents = inspect_log(path)
    assert [(r.request_hash, r.prompt_tokens) for r in contents.results] == [
        ("h1", 900), ("h3", None), ("h4", None),
    ]  # fmt: skip
    described = [line.describe(path) for line in contents.damaged]
    assert described[0] == (
        f"{path}:2: JSON nested too deep to decode; the answer is unusable: counted as not answered, "
        "asked again once unless another answer to it is kept"
    )
    assert described[1].startswith(
        f"{path}:3: field 'prompt_tokens': Input should be less than or equal to 9223372036854775807"
    )
    assert described[2].endswith("the reply is kept, with prompt_tokens NULL")
    assert len(repair(path)) == 3 and [r.prompt_tokens for r in read_log(path)] == [900, None, None]
    assert inspect_log(path).damaged == []

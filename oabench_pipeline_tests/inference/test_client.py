"""The model client against a real loopback OpenAI-compatible server: concurrency, retries, secrets."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from oabench_pipeline.inference.client import (
    ChatRequest,
    ChatResult,
    EndpointConfig,
    FatalEndpointError,
    RunStats,
    clean_error_text,
    parse_retry_after,
    redact,
    run_blocking,
    run_chat_requests,
    trusted_cost,
)
from oabench_pipeline_tests.servers.openai_replay import FaultProfile, RecordedReply, ReplayServer

MODEL = "test/model-x"
KEY = "sk-or-v1-SECRETKEY0123456789"


def prompt(i: int) -> str:
    return f"Questão {i}: qual a alternativa correta?"


def replies(n: int, model: str = MODEL) -> dict[tuple[str, str], RecordedReply]:
    """Distinct answers per prompt, so a mixed-up reply would show."""
    return {
        (model, prompt(i)): RecordedReply(
            "ABCD"[i % 4], prompt_tokens=100 + i, completion_tokens=1, cost=0.001
        )
        for i in range(n)
    }


def requests(n: int, model: str = MODEL, start: int = 0) -> list[ChatRequest]:
    return [
        ChatRequest(
            qid=f"q{i}",
            body={"model": model, "messages": [{"role": "user", "content": prompt(i)}], "temperature": 0},
            request_hash=f"h{i}",
        )
        for i in range(start, start + n)
    ]


def fast_endpoint(base_url: str, **overrides: float | int | str | None) -> EndpointConfig:
    """Small timeouts and backoffs so retry tests take milliseconds, not minutes."""
    settings: dict = {
        "api_key": KEY,
        "timeout_s": 2.0,
        "connect_timeout_s": 2.0,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
    }
    settings.update(overrides)
    return EndpointConfig(base_url=base_url, **settings)


def run(
    endpoint: EndpointConfig, reqs: Sequence[ChatRequest], concurrency: int = 4, should_stop=None
) -> tuple[list[ChatResult], RunStats]:
    results: list[ChatResult] = []
    stats = asyncio.run(run_chat_requests(endpoint, reqs, concurrency, results.append, should_stop))
    return results, stats


# ------------------------------------------------------------------------------------- happy path


def test_keeps_exactly_concurrency_in_flight_and_answers_each_prompt_once() -> None:
    with ReplayServer(replies=replies(30), latency_s=0.05) as srv:
        results, stats = run(fast_endpoint(srv.base_url), requests(30), concurrency=7)
        server = srv.stats
    assert server.max_in_flight == 7
    assert server.total_requests == 30 == stats.sent_requests
    assert server.duplicate_answers == {}
    assert server.unmatched == 0
    assert sorted(r.qid for r in results) == sorted(f"q{i}" for i in range(30))
    by_qid = {r.qid: r for r in results}
    assert by_qid["q5"].raw_response == "B" and by_qid["q5"].prompt_tokens == 105
    assert by_qid["q5"].cost_usd == pytest.approx(0.001)
    assert all(r.error is None and r.attempts == 1 and r.latency_ms >= 50 for r in results)
    assert stats.answered == 30 and stats.errors == 0 and stats.retries == 0
    # That 7 were really in flight at once is the server's count above, not a wall-clock bound.


def test_pool_refills_a_slot_as_soon_as_it_frees_not_by_batches() -> None:
    """One slow answer must not hold back the others, and each result is delivered as it arrives."""
    recorded = replies(7)
    recorded[(MODEL, prompt(0))] = RecordedReply("A", latency_s=0.5)
    order: list[str] = []
    with ReplayServer(replies=recorded, latency_s=0.05) as srv:
        stats = asyncio.run(
            run_chat_requests(fast_endpoint(srv.base_url), requests(7), 2, lambda r: order.append(r.qid))
        )
    # The other slot answers q1..q6 (6 x 50 ms) while q0 takes 500 ms. Batches of 2 would deliver q0
    # second, then wait for it before starting q2..q6.
    assert order[-1] == "q0" and sorted(order[:-1]) == [f"q{i}" for i in range(1, 7)]
    assert stats.answered == 7


def test_reads_reasoning_tokens_and_cost_including_vllm_reasoning_content() -> None:
    reply = RecordedReply("C", reasoning="Pensando...", prompt_tokens=400, completion_tokens=90,
                          reasoning_tokens=88, cost=0.00021)  # fmt: skip
    for field in ("reasoning", "reasoning_content"):
        with ReplayServer(replies={(MODEL, prompt(0)): reply}, reasoning_field=field) as srv:  # type: ignore[arg-type]
            (result,), _ = run(fast_endpoint(srv.base_url), requests(1))
        assert (result.raw_response, result.reasoning) == ("C", "Pensando...")
        assert (result.prompt_tokens, result.completion_tokens, result.reasoning_tokens) == (400, 90, 88)
        assert result.cost_usd == pytest.approx(0.00021) and result.total_cost_usd == pytest.approx(0.00021)


# ---------------------------------------------------------------------------------------- retries


@pytest.mark.parametrize(
    ("fault", "cause"),
    [
        ("5xx", "5xx"),
        ("429", "429"),
        ("hang", "timeout"),
        ("drop", "connection"),
        ("malformed_json", "malformed"),
        ("empty_choices", "malformed"),
        ("html", "malformed"),
        ("non_utf8", "malformed"),
        ("empty_answer", "empty"),
    ],
)
def test_each_fault_is_retried_and_ends_answered(fault: str, cause: str) -> None:
    faults = FaultProfile(
        seed=7, retry_after_s=0.01, hang_s=2.0, max_faults_per_prompt=1, **{f"rate_{fault}": 1.0}
    )
    with ReplayServer(replies=replies(6), latency_s=0.01, faults=faults) as srv:
        results, stats = run(fast_endpoint(srv.base_url, timeout_s=1.0), requests(6), concurrency=3)
        server = srv.stats
    assert server.faults == {fault: 6}
    assert all(r.ok and r.attempts == 2 for r in results), [(r.qid, r.error) for r in results]
    assert {r.qid: r.raw_response for r in results} == {f"q{i}": "ABCD"[i % 4] for i in range(6)}
    assert stats.retries_by_cause == {cause: 6}
    assert stats.sent_requests == server.total_requests == 12
    assert server.duplicate_answers == {}


def test_random_fault_mix_still_answers_everything_once() -> None:
    faults = FaultProfile(
        seed=3, rate_5xx=0.15, rate_429=0.1, retry_after_s=0.01, rate_drop=0.1, rate_malformed_json=0.05,
        rate_html=0.05, max_faults_per_prompt=2,
    )  # fmt: skip
    with ReplayServer(replies=replies(40), latency_s=0.005, faults=faults) as srv:
        results, stats = run(fast_endpoint(srv.base_url), requests(40), concurrency=8)
        server = srv.stats
    assert sum(server.faults.values()) > 0
    assert stats.answered == 40 and all(r.ok for r in results)
    assert server.duplicate_answers == {}
    assert set(server.answers_per_prompt.values()) == {1}


def test_retry_after_seconds_is_waited_at_least() -> None:
    faults = FaultProfile(rate_429=1.0, retry_after_s=0.4, max_faults_per_prompt=1)
    with ReplayServer(replies=replies(1), faults=faults) as srv:
        (result,), stats = run(fast_endpoint(srv.base_url), requests(1))
    assert result.ok and result.attempts == 2
    # Backoff alone would be <= 0.05 s here, so only honouring the header explains >= 0.4 s.
    assert stats.elapsed_s >= 0.4


def test_retry_after_http_date_is_waited_at_least() -> None:
    faults = FaultProfile(
        rate_429=1.0, retry_after_s=0.5, retry_after_as_http_date=True, max_faults_per_prompt=1
    )
    with ReplayServer(replies=replies(1), faults=faults) as srv:
        started = time.time()
        (result,), _ = run(fast_endpoint(srv.base_url), requests(1))
        waited = time.time() - started
    assert result.ok and result.attempts == 2
    assert waited >= 0.5  # the date names a second >= now + 0.5 s; backoff alone is <= 0.05 s


def test_parse_retry_after_forms() -> None:
    now = datetime(2026, 3, 3, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("3", now) == 3.0
    assert parse_retry_after("0.5", now) == 0.5
    assert parse_retry_after(format_datetime(now + timedelta(seconds=42), usegmt=True), now) == 42.0
    assert parse_retry_after(format_datetime(now - timedelta(seconds=5), usegmt=True), now) == 0.0
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None, now) is None


def test_malformed_body_is_retried_a_bounded_number_of_times_then_reported_as_error() -> None:
    with ReplayServer(replies=replies(1), faults=FaultProfile(rate_malformed_json=1.0)) as srv:
        (result,), stats = run(fast_endpoint(srv.base_url, max_malformed_retries=2), requests(1))
        server = srv.stats
    assert result.raw_response is None and result.error is not None and "not JSON" in result.error
    assert result.attempts == 3 == server.total_requests
    assert stats.errors == 1 and stats.answered == 0 and stats.retries_by_cause == {"malformed": 2}


def test_non_utf8_every_time_becomes_an_error_row_not_a_crash() -> None:
    with ReplayServer(replies=replies(1), faults=FaultProfile(rate_non_utf8=1.0)) as srv:
        (result,), _ = run(fast_endpoint(srv.base_url, max_malformed_retries=1), requests(1))
    assert result.raw_response is None and "UTF-8" in (result.error or "")
    assert result.attempts == 2


def test_recorded_empty_answer_is_retried_then_final_with_paid_cost_kept() -> None:
    """Like gpt-5-mini in the published runs: 64 completion tokens, no text. After the attempts the empty
    text is the model's final answer (scored invalid), not an error a rerun would pay for again."""
    empty = {(MODEL, prompt(0)): RecordedReply("", prompt_tokens=357, completion_tokens=64, cost=0.0001)}
    with ReplayServer(replies=empty) as srv:
        (result,), stats = run(fast_endpoint(srv.base_url, max_malformed_retries=2), requests(1))
    assert (result.raw_response, result.error, result.ok, result.empty_answer) == ("", None, True, True)
    assert result.attempts == 3 and stats.retries_by_cause == {"empty": 2}
    assert result.completion_tokens == 64
    assert result.total_cost_usd == pytest.approx(0.0003)  # three paid calls


NESTED_JSON = b"[" * 100_000 + b"]" * 100_000  # Python's JSON decoder raises RecursionError on it


def test_a_reply_too_deeply_nested_to_decode_is_malformed_and_the_replies_in_flight_are_kept() -> None:
    """A hostile reply must not abort the pool: the others (in flight at the same time) all land."""
    hostile = replies(8)
    hostile[(MODEL, prompt(3))] = RecordedReply("", raw_body=b'{"choices": ' + NESTED_JSON + b"}")
    with ReplayServer(replies=hostile, latency_s=0.02) as srv:
        results, stats = run(fast_endpoint(srv.base_url, max_malformed_retries=2), requests(8), concurrency=4)
        server = srv.stats
    by_qid = {r.qid: r for r in results}
    assert len(results) == 8 and sum(r.ok for r in results) == 7
    nested = by_qid["q3"]
    assert nested.raw_response is None and nested.attempts == 3
    assert nested.error == "gave up after 3 attempts: body is JSON nested too deep to decode"
    assert stats.retries_by_cause == {"malformed": 2} and server.total_requests == 10


def test_a_failure_no_parser_foresaw_is_a_malformed_reply_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever decoding a reply raises, it is retried within the attempts, then an error row."""
    from oabench_pipeline.inference import client

    def broken(payload: bytes) -> None:
        raise MemoryError("no room to decode")

    monkeypatch.setattr(client, "parse_completion", broken)
    with ReplayServer(replies=replies(2)) as srv:
        results, _ = run(fast_endpoint(srv.base_url, max_malformed_retries=1), requests(2))
    assert [r.error for r in results] == [
        "gave up after 2 attempts: reply could not be decoded (MemoryError: no room to decode)"
    ] * 2


@pytest.mark.parametrize(
    ("usage", "note"),
    [
        (b'{"prompt_tokens": 1' + b"0" * 400 + b', "completion_tokens": 1}', "usage.prompt_tokens 100000000000... (401 digits) is beyond a 64-bit integer: stored as NULL"),
        (b'{"prompt_tokens": 12, "completion_tokens": -5}', "usage.completion_tokens -5 is negative: stored as NULL"),
        (b'{"prompt_tokens": 12, "completion_tokens": 9223372036854775808}', "usage.completion_tokens 9223372036854775808 is beyond a 64-bit integer: stored as NULL"),
    ],
)  # fmt: skip
def test_token_counts_no_int64_column_holds_are_null_with_a_note(usage: bytes, note: str) -> None:
    body = b'{"choices": [{"message": {"content": "B"}}], "usage": ' + usage + b"}"
    with ReplayServer(replies={(MODEL, prompt(0)): RecordedReply("", raw_body=body)}) as srv:
        (result,), _ = run(fast_endpoint(srv.base_url), requests(1))
    assert result.ok and result.raw_response == "B" and result.cost_note == note
    assert None in (result.prompt_tokens, result.completion_tokens)
    assert all(
        count is None or 0 <= count < 2**63 for count in (result.prompt_tokens, result.completion_tokens)
    )


def test_an_endpoint_answering_500_to_every_request_stops_after_the_first_round_with_one_line() -> None:
    """Like connection refused: once every request of the first round gave up on the same 5xx with no
    answer in between, the rest of the cell is not sent (78 questions × 7 attempts took 84 s before)."""
    delivered: list[ChatResult] = []
    with ReplayServer(replies=replies(12), faults=FaultProfile(fixed_status=500)) as srv:
        with pytest.raises(FatalEndpointError) as caught:
            asyncio.run(
                run_chat_requests(
                    fast_endpoint(srv.base_url, max_retries=3), requests(12), 3, delivered.append
                )
            )
        server = srv.stats
    message = str(caught.value)
    assert "\n" not in message and caught.value.status == 500
    assert f"127.0.0.1:{srv.base_url.split(':')[2].split('/')[0]} keeps answering HTTP 500" in message
    assert "every request of the first round (3) got it on all 4 attempts" in message
    assert server.total_requests == 12  # the first round, 3 × 4 attempts; the other 9 never sent
    assert len(delivered) == 2 and all("HTTP 500" in (r.error or "") for r in delivered)


def test_transient_errors_among_answers_exhaust_max_retries_into_an_error_row() -> None:
    """A request that keeps getting 500 while others are answered ends as an error row: the cell goes on."""
    broken = ChatRequest(
        qid="q-broken",
        body={"model": "test/broken", "messages": [{"role": "user", "content": "?"}]},
        request_hash="h-broken",
    )
    with ReplayServer(replies=replies(3), unknown_model_status=500) as srv:  # 500 for `test/broken` only
        results, stats = run(fast_endpoint(srv.base_url, max_retries=3), [broken, *requests(3)], 2)
        server = srv.stats
    failed = [r for r in results if not r.ok]
    assert [r.qid for r in failed] == ["q-broken"] and stats.answered == 3
    assert failed[0].attempts == 4 and "HTTP 500" in (failed[0].error or "")
    assert server.total_requests == 7 and stats.retries_by_cause == {"5xx": 3}


def test_intermittent_5xx_in_the_first_round_are_retried_patiently_and_everything_is_answered() -> None:
    faults = FaultProfile(seed=11, rate_5xx=0.6, max_faults_per_prompt=3)
    with ReplayServer(replies=replies(12), faults=faults) as srv:
        results, stats = run(fast_endpoint(srv.base_url), requests(12), 4)
        server = srv.stats
    assert stats.answered == 12 and all(r.ok for r in results)
    assert stats.retries_by_cause["5xx"] == sum(server.faults.values()) > 4


def test_other_4xx_is_an_error_row_for_that_question_only() -> None:
    faults = FaultProfile(
        fixed_status=400, fixed_status_message="This model's maximum context length is 8192"
    )
    with ReplayServer(replies=replies(3), faults=faults) as srv:
        results, _ = run(fast_endpoint(srv.base_url), requests(3))
        server = srv.stats
    assert len(results) == 3 and all("HTTP 400" in (r.error or "") and r.attempts == 1 for r in results)
    assert server.total_requests == 3


def test_server_overload_429_is_absorbed() -> None:
    """More in flight than the provider allows: 429 + Retry-After until the client fits."""
    faults = FaultProfile(max_in_flight_before_429=3, retry_after_s=0.3)
    with ReplayServer(replies=replies(6), latency_s=0.05, faults=faults) as srv:
        results, stats = run(fast_endpoint(srv.base_url), requests(6), concurrency=4)
    assert all(r.ok for r in results)
    assert stats.retries_by_cause.get("429", 0) >= 1
    # A lower bound only (it cannot fail on a slow machine): backoff alone is <= 0.05 s with this endpoint.
    assert stats.elapsed_s >= 0.3  # honoured Retry-After: 0.3


# ------------------------------------------------------------------------------------------ fatal


@pytest.mark.parametrize(
    ("server_kwargs", "status", "words"),
    [
        ({"api_key": "the-right-key"}, 401, "authentication"),
        ({"faults": FaultProfile(fixed_status=403)}, 403, "forbidden"),
        (
            {"faults": FaultProfile(fixed_status=402, fixed_status_message="Insufficient credits")},
            402,
            "credits",
        ),
        ({"unknown_model_status": 404}, 404, "unknown model"),
        ({"faults": FaultProfile(fixed_status=400)}, 400, "unknown model"),  # "x is not a valid model ID"
    ],
)
def test_fatal_statuses_stop_the_whole_pool_without_leaking_the_key(
    server_kwargs: dict, status: int, words: str
) -> None:
    kwargs = {"faults": FaultProfile(echo_authorization=True), **server_kwargs}
    if "faults" in server_kwargs:
        kwargs["faults"] = FaultProfile(
            echo_authorization=True,
            fixed_status=server_kwargs["faults"].fixed_status,
            fixed_status_message=server_kwargs["faults"].fixed_status_message,
        )
    delivered: list[ChatResult] = []
    with ReplayServer(replies={} if status == 404 else replies(40), latency_s=0.02, **kwargs) as srv:
        endpoint = fast_endpoint(srv.base_url)
        with pytest.raises(FatalEndpointError) as caught:
            asyncio.run(run_chat_requests(endpoint, requests(40), 4, delivered.append))
        server = srv.stats
    message = str(caught.value)
    assert caught.value.status == status
    assert f"HTTP {status}" in message and words in message
    assert MODEL in message and "/v1/chat/completions" in message
    assert KEY not in message and "SECRETKEY" not in message
    assert delivered == []
    assert server.total_requests <= 4  # the first wave at most: nothing launched after the error
    assert f"Bearer {KEY}" in server.authorization_headers  # the key did travel, in the header


def test_fatal_midway_keeps_results_already_delivered() -> None:
    """Known model first, then a model the provider does not have: earlier answers stay delivered."""
    reqs = [*requests(5), *requests(5, model="typo/no-such-model", start=5), *requests(5, start=10)]
    delivered: list[ChatResult] = []
    with ReplayServer(replies=replies(15), unknown_model_status=404) as srv:
        with pytest.raises(FatalEndpointError, match="no-such-model"):
            asyncio.run(run_chat_requests(fast_endpoint(srv.base_url), reqs, 1, delivered.append))
        assert srv.stats.total_requests == 6
    assert [r.qid for r in delivered] == ["q0", "q1", "q2", "q3", "q4"]


# ---------------------------------------------------------------------------------------- secrets


def test_key_echoed_in_error_bodies_is_redacted_from_error_rows() -> None:
    faults = FaultProfile(echo_authorization=True)
    broken = ChatRequest(qid="q-broken", body={"model": "test/broken", "messages": []}, request_hash="hb")
    # HTTP 500 (echoing the key) for `test/broken` only: an error row among answers, not a dead endpoint.
    with ReplayServer(replies=replies(1), faults=faults, unknown_model_status=500) as srv:
        results, _ = run(fast_endpoint(srv.base_url, max_retries=1), [broken, *requests(1)], 2)
    [result] = [r for r in results if not r.ok]
    assert result.error is not None
    assert "got Authorization: ***" in result.error  # the echo happened, and was masked
    assert KEY not in result.error and "SECRETKEY" not in result.error


def test_redact_and_truncate() -> None:
    text = f"bad header Bearer {KEY}; raw {KEY}; other sk-2"
    assert redact(text, [KEY, None, ""]) == "bad header ***; raw ***; other sk-2"
    assert redact("abc", []) == "abc"
    assert redact("k-long and k", ["k", "k-long"]) == "*** and ***"
    # Truncation happens after redaction, so a key straddling the cut cannot leave a prefix.
    long = "x" * 495 + KEY + "y" * 1000
    cleaned = clean_error_text(long, [KEY], limit=500)
    assert "sk-or" not in cleaned and len(cleaned) < 560 and "more chars" in cleaned
    assert KEY not in repr(EndpointConfig("http://h/v1", api_key=KEY))


def test_redact_finds_the_key_in_every_common_form() -> None:
    raw, b64 = KEY.encode(), base64.b64encode
    forms = [
        KEY.upper(),
        f"bearer  {KEY.lower()}",
        "".join(f"%{byte:02X}" for byte in raw),
        KEY[:5] + "%2d" + KEY[6:] if KEY[5] == "-" else KEY.replace("-", "%2D"),
        "".join(f"\\u{ord(c):04x}" for c in KEY),
        "".join(f"\\\\u{ord(c):04x}" for c in KEY),  # JSON inside a JSON string
        "".join(f"&#{ord(c)};" for c in KEY),
        b64(raw).decode(),
        b64(b"Bearer " + raw).decode(),
        b64(b"me:" + raw).decode(),  # Basic auth
        b64(b"x" + raw + b"tail").decode(),  # inside longer base64, at the other two alignments
        b64(b"xy" + raw).decode().rstrip("="),
        base64.urlsafe_b64encode(b"\xfb\xff" + raw).decode(),
        quote(b64(b"Bearer " + raw).decode(), safe=""),  # base64, then percent-encoded
    ]
    for form in forms:
        assert redact(f"<{form}>", [KEY]) == "<***>", form
    assert redact(f"token {b64(raw).decode().rstrip('=')}Rest-of_token, next", [KEY]) == "token ***, next"
    unrelated = f"{b64(b'sk-or-v1-OTHER').decode()} %41 \\u0041 &#65; {KEY[:8]}"
    assert redact(unrelated, [KEY]) == unrelated


def test_a_malformed_body_echoing_the_key_is_redacted_before_it_is_cut() -> None:
    """The excerpt of a malformed 200 (its first 200 characters) is cut after redaction: the key sits
    across the cut, so cutting first would have kept a piece of it that no redaction recognises."""
    body = ("x" * 190 + f"Bearer {KEY} " + base64.b64encode(KEY.encode()).decode() + "y" * 300).encode()
    reply = RecordedReply("", raw_body=body, content_type="text/plain")
    with ReplayServer(replies={(MODEL, prompt(0)): reply}) as srv:
        (result,), _ = run(fast_endpoint(srv.base_url), requests(1))
    assert result.error is not None and result.error.startswith(
        "gave up after 3 attempts: body is not JSON: "
    )
    assert "***" in result.error and "SECRET" not in result.error and "sk-or" not in result.error
    assert "U0VDUkVU" not in result.error  # no piece of the key's base64 either


# ------------------------------------------------------------------------------- stopping and size


def test_should_stop_stops_launching_new_requests_and_in_flight_ones_finish() -> None:
    delivered: list[ChatResult] = []

    def budget_left() -> str | None:
        return "budget exhausted" if len(delivered) >= 3 else None

    with ReplayServer(replies=replies(20), latency_s=0.03) as srv:
        stats = asyncio.run(
            run_chat_requests(fast_endpoint(srv.base_url), requests(20), 2, delivered.append, budget_left)
        )
        server = srv.stats
    assert stats.stop_reason == "budget exhausted"
    assert 3 <= len(delivered) <= 4  # at most the other in-flight request finishes after the 3rd
    assert stats.started == stats.results == len(delivered) == server.total_requests
    assert all(r.ok for r in delivered)


def test_oversized_reply_is_an_error_row_without_retry_and_a_large_one_within_cap_is_kept() -> None:
    huge = "A" * (10 * 1024 * 1024)
    big = {(MODEL, prompt(0)): RecordedReply(huge), (MODEL, prompt(1)): RecordedReply("B" * 300_000)}
    with ReplayServer(replies=big) as srv:
        results, _ = run(fast_endpoint(srv.base_url, max_response_bytes=1024 * 1024), requests(2))
        server = srv.stats
    by_qid = {r.qid: r for r in results}
    assert by_qid["q0"].raw_response is None and "exceeded" in (by_qid["q0"].error or "")
    assert by_qid["q0"].attempts == 1
    assert by_qid["q1"].raw_response == "B" * 300_000
    assert server.total_requests == 2
    with ReplayServer(replies=big) as srv:
        (result,), _ = run(fast_endpoint(srv.base_url, max_response_bytes=16 * 1024 * 1024), requests(1))
    assert result.raw_response is not None and len(result.raw_response) == len(huge)


def test_cancelled_while_workers_are_starting_leaves_no_worker_running() -> None:
    """Workers start one loop turn apart; a cancel in between must take the started ones down too."""

    async def cancel_early() -> list[asyncio.Task]:
        with ReplayServer(replies=replies(64), latency_s=0.5) as srv:
            endpoint = fast_endpoint(srv.base_url)
            pool = asyncio.create_task(run_chat_requests(endpoint, requests(64), 64, lambda r: None))
            for _ in range(5):  # a few workers started, far from all 64
                await asyncio.sleep(0)
            pool.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pool
            return [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]

    assert asyncio.run(cancel_early()) == []


def test_rejects_nonsense_concurrency() -> None:
    with pytest.raises(ValueError, match="concurrency"):
        asyncio.run(
            run_chat_requests(EndpointConfig("http://127.0.0.1:9/v1"), requests(1), 0, lambda r: None)
        )


def test_refused_connection_is_retried_a_few_times_then_fatal() -> None:
    with ReplayServer() as srv:
        dead_url = srv.base_url  # nothing listens there once the server is closed
    delivered: list[ChatResult] = []
    with pytest.raises(FatalEndpointError, match="connection refused") as caught:
        asyncio.run(
            run_chat_requests(
                fast_endpoint(dead_url, max_refused_retries=2), requests(3), 1, delivered.append
            )
        )
    assert "4 times" not in str(caught.value) and "3 times" in str(caught.value)  # 1 try + 2 retries
    assert delivered == []


# ---------------------------------------------------------------------------------- connections


def test_workers_share_one_keep_alive_pool_of_concurrency_connections() -> None:
    with ReplayServer(replies=replies(30), latency_s=0.01) as srv:
        stats = run_blocking(run_chat_requests(fast_endpoint(srv.base_url), requests(30), 4, lambda r: None))
        server = srv.stats
    assert stats.answered == 30 and server.total_requests == 30
    assert server.connections_opened == 4  # opened once per worker slot, then reused


def test_server_closing_idle_keep_alive_connections_costs_no_retry() -> None:
    """A server whose keep-alive timeout is shorter than the gaps between requests (nginx, gateways)."""
    paused: list[ChatResult] = []

    def slow_consumer(result: ChatResult) -> None:
        paused.append(result)
        time.sleep(0.1)  # blocks the loop: every connection sits idle past the server's 30 ms

    with ReplayServer(replies=replies(8), idle_close_s=0.03) as srv:
        stats = asyncio.run(run_chat_requests(fast_endpoint(srv.base_url), requests(8), 2, slow_consumer))
        server = srv.stats
    assert stats.answered == 8 and stats.retries == 0
    assert server.total_requests == 8 and server.connections_opened >= 4  # they were closed, and reopened


def test_gzip_always_replies_are_decoded() -> None:
    with ReplayServer(replies=replies(6), gzip_always=True) as srv:
        results, stats = run(fast_endpoint(srv.base_url), requests(6), concurrency=3)
        server = srv.stats
    assert sorted((r.qid, r.raw_response) for r in results) == [(f"q{i}", "ABCD"[i % 4]) for i in range(6)]
    assert stats.retries == 0 and server.total_requests == 6


def test_ipv6_literal_endpoint_gets_a_bracketed_host_header() -> None:
    with ReplayServer(replies=replies(3), host="::1") as srv:
        assert srv.base_url.startswith("http://[::1]:")
        results, _ = run(fast_endpoint(srv.base_url), requests(3))
        server = srv.stats
    assert all(r.ok for r in results)
    assert server.host_headers == {srv.base_url.split("/")[2]}  # "[::1]:PORT"


def test_azure_url_keeps_path_prefix_and_query_and_sends_api_key_header() -> None:
    with ReplayServer(
        replies=replies(3),
        base_path="/openai/deployments/gpt-4o",
        required_query="api-version=2024-10-21",
        api_key=KEY,
        api_key_header="api-key",
    ) as srv:
        results, _ = run(fast_endpoint(srv.base_url, api_key_header="api-key"), requests(3))
        server = srv.stats
    assert all(r.ok for r in results), [r.error for r in results]
    assert server.request_targets == {
        "POST /openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
    }
    assert server.authorization_headers == {KEY}  # the raw key, in `api-key`
    assert "authorization" not in server.header_values


def test_extra_headers_are_sent_and_secret_ones_redacted_from_errors() -> None:
    secret = "referer-secret-42"
    faults = FaultProfile(rate_5xx=1.0)
    with ReplayServer(replies=replies(1), faults=faults) as srv:
        endpoint = fast_endpoint(
            srv.base_url,
            max_retries=0,
            extra_headers=(("X-Title", "OABench"),),
            secret_headers=(("X-Gateway-Token", secret),),
        )
        with pytest.raises(FatalEndpointError, match="keeps answering HTTP 50") as caught:
            run(endpoint, requests(1))  # its only request got 5xx: the endpoint is taken for down
        server = srv.stats
    assert secret not in str(caught.value)
    assert server.header_values["x-title"] == {"OABench"}
    assert server.header_values["x-gateway-token"] == {secret}
    assert secret not in repr(endpoint)
    assert redact(f"token {secret}", endpoint.secrets) == "token ***"


def test_redirect_is_fatal_and_names_where_it_points() -> None:
    with ReplayServer(replies=replies(4), faults=FaultProfile(fixed_status=308)) as srv:
        with pytest.raises(FatalEndpointError) as caught:
            run(fast_endpoint(srv.base_url), requests(4), concurrency=1)
        server = srv.stats
    assert "HTTP 308" in str(caught.value) and "https://moved.example/v1/chat/completions" in str(
        caught.value
    )
    assert server.total_requests == 1


def test_unresolvable_host_is_fatal_at_once() -> None:
    with pytest.raises(FatalEndpointError, match="does not resolve"):
        run(fast_endpoint("http://no-such-host.invalid/v1"), requests(3), concurrency=1)


# -------------------------------------------------------------------------------- cost, provenance


def test_provenance_fields_come_from_the_reply() -> None:
    with ReplayServer(replies=replies(1)) as srv:
        (result,), _ = run(fast_endpoint(srv.base_url), requests(1))
    provenance = result.provenance
    assert provenance.response_id is not None and provenance.response_id.startswith("gen-replay-")
    assert (provenance.response_model, provenance.finish_reason) == (MODEL, "stop")
    assert (provenance.response_provider, provenance.system_fingerprint) == ("replay", "fp_replay")


@pytest.mark.parametrize("bad", [-5.0, float("nan"), float("inf")])
def test_negative_or_non_finite_cost_is_null_with_a_note_and_never_summed(bad: float) -> None:
    recorded = {(MODEL, prompt(0)): RecordedReply("A", cost=bad)}
    with ReplayServer(replies=recorded) as srv:
        (result,), _ = run(fast_endpoint(srv.base_url), requests(1))
    assert result.ok and result.cost_usd is None and result.total_cost_usd is None
    assert result.cost_note is not None and "usage.cost" in result.cost_note


def test_cost_header_is_used_when_the_body_has_no_cost() -> None:
    with ReplayServer(replies=replies(2), cost_header="x-litellm-response-cost") as srv:
        results, _ = run(fast_endpoint(srv.base_url), requests(2))
    assert all(r.cost_usd == pytest.approx(0.001) and r.cost_note is None for r in results)


def test_cost_of_unparseable_replies_counts_towards_the_paid_total() -> None:
    """A gateway bills a reply whose body is broken: the budget must see that cost."""
    faults = FaultProfile(rate_malformed_json=1.0, max_faults_per_prompt=2)
    with ReplayServer(replies=replies(1), faults=faults, cost_header="x-litellm-response-cost") as srv:
        # The broken bodies carry no cost header in the server (they are not completions), so the
        # check is on the pure function that reads it.
        (result,), _ = run(fast_endpoint(srv.base_url, max_malformed_retries=2), requests(1))
    assert result.ok and result.attempts == 3
    # A body with usage but no choices (billed, unusable) counts its cost too.
    billed_empty = {
        (MODEL, prompt(0)): RecordedReply("", raw_body=b'{"choices": [], "usage": {"cost": 0.125}}')
    }
    with ReplayServer(replies=billed_empty) as srv:
        (unusable,), _ = run(fast_endpoint(srv.base_url, max_malformed_retries=1), requests(1))
    assert not unusable.ok and unusable.attempts == 2 and unusable.total_cost_usd == 0.25
    headers = httpx.Headers({"x-litellm-response-cost": "0.25"})
    assert trusted_cost(None, headers) == (0.25, None)
    assert trusted_cost(-1, headers)[0] == 0.25 and "negative" in (trusted_cost(-1, headers)[1] or "")
    assert trusted_cost("NaN", None) == (None, "usage.cost 'NaN' is not finite: cost stored as NULL")


def _self_signed_localhost(folder: Path) -> tuple[Path, Path]:
    """A certificate for `localhost` and its key, made here (no network, no openssl binary)."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


def test_https_endpoint_with_verified_certificate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real providers are HTTPS: the client's TLS path verifies the certificate and answers over it."""
    import ssl

    cert, key = _self_signed_localhost(tmp_path)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with ReplayServer(replies=replies(6), ssl_context=server_context) as server:
        assert server.base_url.startswith("https://")
        results: list[ChatResult] = []
        asyncio.run(run_chat_requests(fast_endpoint(server.base_url), requests(6), 3, results.append))
    assert sorted((r.qid, r.raw_response) for r in results) == [(f"q{i}", "ABCD"[i % 4]) for i in range(6)]
    assert all(r.error is None for r in results)


def test_https_endpoint_with_untrusted_certificate_is_fatal_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import ssl

    cert, key = _self_signed_localhost(tmp_path)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with ReplayServer(replies=replies(4), ssl_context=server_context) as server:
        results: list[ChatResult] = []
        with caplog.at_level("INFO"), pytest.raises(FatalEndpointError, match="certificate") as caught:
            asyncio.run(run_chat_requests(fast_endpoint(server.base_url), requests(4), 1, results.append))
    assert results == []
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]  # fatal at the first attempt
    assert "SSL_CERT_FILE" in str(caught.value)


def test_a_stop_during_a_retry_backoff_sends_nothing_more() -> None:
    """Ctrl-C while a request waits to be retried (Retry-After 30 s): the wait ends, the retry is not sent,
    and the request is not reported (nothing was received for it: a rerun asks it)."""
    stop: list[str] = []
    faults = FaultProfile(rate_429=1.0, retry_after_s=30.0)
    with ReplayServer(replies=replies(2), api_key=KEY, faults=faults) as server:
        endpoint = fast_endpoint(server.base_url, max_retry_after_s=60.0)

        async def stop_soon() -> RunStats:
            async def flip() -> None:
                while server.stats.total_requests < 2:
                    await asyncio.sleep(0.01)
                stop.append("interrupted (SIGINT)")

            flipper = asyncio.create_task(flip())
            stats = await run_chat_requests(
                endpoint, requests(2), 2, results.append, lambda: stop[0] if stop else None
            )
            await flipper
            return stats

        results: list[ChatResult] = []
        stats = asyncio.run(asyncio.wait_for(stop_soon(), timeout=10))
        assert server.stats.total_requests == 2
    assert results == []
    assert stats.stop_reason == "interrupted (SIGINT)"
    assert stats.sent_requests == 2 and stats.results == 0

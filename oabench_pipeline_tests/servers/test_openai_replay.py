"""The replay server itself: published replies, fallback, model list, deterministic faults."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import httpx

from oabench_pipeline_tests.servers.openai_replay import (
    FaultProfile,
    ModelPricing,
    RecordedReply,
    ReplayServer,
    load_published_replies,
    prompt_key,
)


def question_texts(shared_oab: Path) -> dict[str, str]:
    """Stand-in user messages: one distinct text per qid seen in the published runs."""
    qids = {
        json.loads(line)["qid"]
        for path in (shared_oab / "published-runs").glob("*/inferences.jsonl")
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    }
    return {qid: f"Enunciado da questão {qid}" for qid in qids}


def test_load_published_replies_keys_by_model_and_user_text(shared_oab: Path) -> None:
    texts = question_texts(shared_oab)
    replies = load_published_replies(shared_oab / "published-runs", texts)
    models = {model for model, _ in replies}
    assert models == {
        "openai/gpt-5-mini",
        "google/gemini-2.5-flash-lite",
        "deepseek/deepseek-v3.2",
        "anthropic/claude-haiku-4.5",
        "x-ai/grok-4.1-fast",
    }
    # 4 full runs x 238 answered (2 annulled skipped) + the aborted gpt-5-mini run's 24 lines.
    assert len(replies) == 4 * 238 + 24
    haiku = replies[("anthropic/claude-haiku-4.5", texts["oab-43-1f-q14"])]
    assert haiku == RecordedReply("A", None, 559, 4, 0, 0.00057321)
    assert ("anthropic/claude-haiku-4.5", texts["oab-43-1f-q1"]) not in replies  # annulled: no call
    grok = replies[("x-ai/grok-4.1-fast", texts["oab-43-1f-q10"])]
    assert (grok.raw_response, grok.reasoning_tokens) == ("D", 284)
    # Only qids the caller can phrase are served.
    assert load_published_replies(shared_oab / "published-runs", {"oab-43-1f-q14": "x"}).keys() == {
        (m, "x") for m in models - {"openai/gpt-5-mini"}
    }


def test_last_line_per_qid_wins_within_a_run(tmp_path: Path) -> None:
    run = tmp_path / "2026-01-01_run"
    run.mkdir()
    lines = [
        {"qid": "q1", "model": "m", "rawResponse": "B", "error": None, "skipped": False},
        {"qid": "q1", "model": "m", "rawResponse": "C", "error": None, "skipped": False},
    ]
    (run / "inferences.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert load_published_replies(tmp_path, {"q1": "texto"}) == {("m", "texto"): RecordedReply("C")}


def test_serves_recorded_reply_fallback_and_model_list() -> None:
    replies = {("m/one", "pergunta"): RecordedReply("D", reasoning="r", prompt_tokens=10, cost=0.5)}
    pricing = {"m/one": ModelPricing("0.000001", "0.000005")}
    with ReplayServer(replies=replies, models=pricing) as srv, httpx.Client(base_url=srv.base_url) as http:
        hit = http.post("/chat/completions", json={"model": "m/one", "messages": [
            {"role": "system", "content": "sys"}, {"role": "user", "content": "pergunta"}]}).json()  # fmt: skip
        miss = http.post("/chat/completions", json={"model": "m/one", "messages": [
            {"role": "user", "content": "outra"}]}).json()  # fmt: skip
        listed = http.get("/models").json()
        stats = srv.stats
    assert hit["choices"][0]["message"] == {"role": "assistant", "content": "D", "reasoning": "r"}
    assert hit["usage"]["prompt_tokens"] == 10 and hit["usage"]["cost"] == 0.5
    assert miss["choices"][0]["message"]["content"] == "A"
    assert stats.unmatched == 1 and stats.total_requests == 2
    assert stats.requests_per_prompt == {prompt_key("m/one", "pergunta"): 1, prompt_key("m/one", "outra"): 1}
    assert listed["data"] == [
        {
            "id": "m/one",
            "name": "m/one",
            "pricing": {"prompt": "0.000001", "completion": "0.000005"},
            "context_length": 128000,
        }
    ]


def test_faults_are_deterministic_per_seed_and_counter() -> None:
    profile = FaultProfile(seed=11, rate_5xx=0.2, rate_drop=0.2, rate_html=0.1)
    first = [profile.pick(n)[0] for n in range(200)]
    assert first == [
        FaultProfile(seed=11, rate_5xx=0.2, rate_drop=0.2, rate_html=0.1).pick(n)[0] for n in range(200)
    ]
    assert first != [
        FaultProfile(seed=12, rate_5xx=0.2, rate_drop=0.2, rate_html=0.1).pick(n)[0] for n in range(200)
    ]
    assert 0.35 < sum(f is not None for f in first) / 200 < 0.65  # ~50% of attempts are faulty
    assert {f for f in first if f} == {"5xx", "drop", "html"}


def test_held_replies_wait_for_release() -> None:
    """`hold_replies(allow=1)`: one reply goes out, the other requests arrive and wait until released."""
    with ReplayServer() as srv, ThreadPoolExecutor(max_workers=3) as pool:
        srv.hold_replies(allow=1)

        def ask(n: int) -> str:
            body = {"model": "m", "messages": [{"role": "user", "content": f"q{n}"}]}
            return httpx.post(f"{srv.base_url}/chat/completions", json=body, timeout=30).json()["id"]

        replies = [pool.submit(ask, n) for n in range(3)]
        next(as_completed(replies))  # the one allowed
        while srv.stats.total_requests < 3:
            time.sleep(0.005)
        assert sum(reply.done() for reply in replies) == 1
        assert sum(srv.stats.answers_per_prompt.values()) == 1
        srv.release_replies()
        assert all(reply.result(timeout=30).startswith("gen-replay-") for reply in replies)
        assert sum(srv.stats.answers_per_prompt.values()) == 3

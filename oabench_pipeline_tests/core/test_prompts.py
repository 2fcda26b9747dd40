"""Prompts and request bodies: byte-exact with OABench, and hashed so identical requests are recognized."""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oabench_pipeline.core.prompts import (
    PROTOCOLS,
    build_messages,
    build_request_body,
    request_hash,
)

# The study's prompts, as published.
DIRETO = (
    "Você é um assistente especializado em direito brasileiro. Responda à questão da prova da OAB com "
    "APENAS a letra da alternativa correta: A, B, C ou D. Não forneça explicações, justificativas ou "
    "qualquer outro texto."
)
DELIBERATIVO = (
    "Você é um assistente especializado em direito brasileiro.\nAnalise a questão da prova da OAB com "
    "cuidado.\nRaciocine passo a passo sobre cada alternativa antes de dar sua resposta final.\nAo final "
    "do seu raciocínio, indique sua resposta no formato exato:\n\nFINAL_ANSWER: <letra>\n\nonde <letra> é "
    "A, B, C ou D."
)


def _messages(protocol: str = "direto") -> list[dict[str, str]]:
    return build_messages(protocol, 12, "Enunciado da questão.", "um", "dois", "três", "quatro")  # type: ignore[arg-type]


@pytest.mark.parametrize(("protocol", "system"), [("direto", DIRETO), ("deliberativo", DELIBERATIVO)])
def test_messages_are_the_published_prompts(protocol: str, system: str) -> None:
    assert _messages(protocol) == [
        {"role": "system", "content": system},
        {
            "role": "user",
            "content": "Questão 12:\n\nEnunciado da questão.\n\nA) um\nB) dois\nC) três\nD) quatro",
        },
    ]


def test_unknown_protocol_is_refused() -> None:
    with pytest.raises(ValueError, match="nativo"):
        build_messages("nativo", 1, "s", "a", "b", "c", "d")  # type: ignore[arg-type]


def test_plain_body_has_study_parameters_and_no_max_tokens() -> None:
    body = build_request_body("google/gemini-3-flash-preview", _messages())
    assert body == {
        "model": "google/gemini-3-flash-preview",
        "messages": _messages(),
        "temperature": 0,
        "top_p": 1,
    }


def test_reasoning_and_web_search_are_added_only_when_asked() -> None:
    body = build_request_body("openai/gpt-5.2", _messages(), reasoning_effort="medium", web_search=True)
    assert body["reasoning"] == {"effort": "medium"}
    assert body["plugins"] == [{"id": "web"}]
    assert "max_tokens" not in body


def test_hash_is_sha256_of_canonical_json() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "Questão"}], "top_p": 1, "temperature": 0}
    canonical = '{"messages":[{"content":"Questão","role":"user"}],"model":"m","temperature":0,"top_p":1}'
    assert request_hash(body) == hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def test_identical_requests_hash_identically_and_any_change_shows() -> None:
    base = build_request_body("openai/gpt-5.2", _messages())
    rebuilt = dict(reversed(list(build_request_body("openai/gpt-5.2", _messages()).items())))
    assert request_hash(base) == request_hash(rebuilt)
    variants = [
        build_request_body("openai/gpt-5-mini", _messages()),
        build_request_body("openai/gpt-5.2", _messages("deliberativo")),
        build_request_body("openai/gpt-5.2", _messages(), reasoning_effort="low"),
        build_request_body("openai/gpt-5.2", _messages(), web_search=True),
        build_request_body(
            "openai/gpt-5.2",
            build_messages("direto", 13, "Enunciado da questão.", "um", "dois", "três", "quatro"),
        ),
    ]
    hashes = {request_hash(base), *(request_hash(v) for v in variants)}
    assert len(hashes) == len(variants) + 1


@settings(max_examples=200, deadline=None)
@given(
    protocol=st.sampled_from(PROTOCOLS),
    number=st.integers(min_value=1, max_value=10_000),
    stem=st.text(),
    choices=st.lists(st.text(), min_size=4, max_size=4),
)
def test_prompt_building_never_raises_and_keeps_every_choice(
    protocol: str, number: int, stem: str, choices: list[str]
) -> None:
    messages = build_messages(protocol, number, stem, *choices)  # type: ignore[arg-type]
    user = messages[1]["content"]
    assert user.startswith(f"Questão {number}:\n\n{stem}\n\n")
    for label, text in zip("ABCD", choices, strict=True):
        assert f"{label}) {text}" in user
    assert re.fullmatch(r"[0-9a-f]{64}", request_hash(build_request_body("m", messages)))


@pytest.mark.parametrize(
    ("model_id", "effort", "web"),
    [("openai/gpt-5.2", None, False), ("x/y", "high", True), ("qwen3:8b", "low", False), ("m", None, True)],
)
def test_a_body_hashed_from_its_messages_digest_hashes_as_request_hash(
    model_id: str, effort: str | None, web: bool
) -> None:
    """`build_requests` hashes each question's prompts once per edition and continues per model: the same
    digest as hashing the whole canonical body (what every response log is keyed by)."""
    from oabench_pipeline.core.prompts import body_suffix, hash_with_digest, hash_with_suffix, messages_digest

    # The model's part of a body, encoded once per model from a body without messages (as `build_requests`).
    suffix = body_suffix(build_request_body(model_id, [], effort, web))
    for protocol in ("direto", "deliberativo"):
        messages = build_messages(
            protocol, 7, 'Enunciado com acentuação e \ud800 "aspas"', "a", "b", "c", "d"
        )
        body = build_request_body(model_id, messages, effort, web)
        assert hash_with_digest(messages_digest(messages), body) == request_hash(body)
        assert hash_with_suffix(messages_digest(messages), suffix) == request_hash(body)

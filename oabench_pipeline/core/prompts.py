"""The exact OABench prompts and request bodies, so our runs are comparable with the published ones.

The wording, line breaks and parameters below are copied from the OABench study (March 2026): changing a
single character changes what is being measured, and changes `request_hash`, which is how cached
responses are found again.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

Protocol = Literal["direto", "deliberativo"]
PROTOCOLS: tuple[Protocol, ...] = ("direto", "deliberativo")

# The direct protocol asks for the bare letter; OABench joined its sentences with single spaces.
SYSTEM_PROMPT_DIRETO = (
    "Você é um assistente especializado em direito brasileiro. "
    "Responda à questão da prova da OAB com APENAS a letra da alternativa correta: A, B, C ou D. "
    "Não forneça explicações, justificativas ou qualquer outro texto."
)

# The deliberative protocol asks for step-by-step reasoning ending in `FINAL_ANSWER: X`; lines joined by "\n".
SYSTEM_PROMPT_DELIBERATIVO = "\n".join(
    [
        "Você é um assistente especializado em direito brasileiro.",
        "Analise a questão da prova da OAB com cuidado.",
        "Raciocine passo a passo sobre cada alternativa antes de dar sua resposta final.",
        "Ao final do seu raciocínio, indique sua resposta no formato exato:",
        "",
        "FINAL_ANSWER: <letra>",
        "",
        "onde <letra> é A, B, C ou D.",
    ]
)

SYSTEM_PROMPTS: dict[Protocol, str] = {
    "direto": SYSTEM_PROMPT_DIRETO,
    "deliberativo": SYSTEM_PROMPT_DELIBERATIVO,
}

# Sampling parameters of the study: greedy decoding and no max_tokens (OABench's aborted gpt-5-mini run,
# capped at max_tokens=100, got empty replies: the reasoning used up the budget before any answer).
TEMPERATURE = 0
TOP_P = 1


def system_prompt(protocol: Protocol) -> str:
    """The system prompt of a protocol; raises ValueError for an unknown protocol."""
    try:
        return SYSTEM_PROMPTS[protocol]
    except KeyError:
        raise ValueError(f"unknown protocol {protocol!r}; expected one of {', '.join(PROTOCOLS)}") from None


def user_prompt(number: int, stem: str, a: str, b: str, c: str, d: str) -> str:
    """The user message: question number, stem, then the four choices labelled `A)`..`D)`."""
    choices = "\n".join(f"{label}) {text}" for label, text in zip("ABCD", (a, b, c, d), strict=True))
    return f"Questão {number}:\n\n{stem}\n\n{choices}"


def build_messages(
    protocol: Protocol, number: int, stem: str, a: str, b: str, c: str, d: str
) -> list[dict[str, str]]:
    """The chat messages (system + user) OABench sends for one question under `protocol`."""
    return [
        {"role": "system", "content": system_prompt(protocol)},
        {"role": "user", "content": user_prompt(number, stem, a, b, c, d)},
    ]


def build_request_body(
    model_id: str,
    messages: list[dict[str, str]],
    reasoning_effort: str | None = None,
    web_search: bool = False,
) -> dict[str, Any]:
    """The exact JSON body for `POST {base_url}/chat/completions`.

    `reasoning` is OpenRouter's unified reasoning parameter and `plugins: [{"id": "web"}]` its web-search
    plugin; both are only present when asked for, so a plain request is a plain OpenAI-compatible body
    that local servers (vLLM, Ollama) accept too.
    """
    body: dict[str, Any] = {
        "model": model_id,
        "messages": messages,
        "temperature": TEMPERATURE,
        "top_p": TOP_P,
    }
    if reasoning_effort is not None:
        body["reasoning"] = {"effort": reasoning_effort}
    if web_search:
        body["plugins"] = [{"id": "web"}]
    return body


def canonical_json(body: dict[str, Any]) -> str:
    """Key-sorted, whitespace-free JSON, UTF-8 kept as is: one text per distinct body."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_hash(body: dict[str, Any], replicate: int = 1) -> str:
    """SHA-256 (hex) of the canonical JSON of a request body (and, from replicate 2 on, its replicate).

    The body holds the model id, both prompts (so the question text and protocol) and every sampling
    parameter, so the hash identifies "this exact question asked this exact way of this exact model":
    identical requests hash identically and any change to prompt, parameters or model gives a new hash.
    Replicate k >= 2 of a run sends the very same body again (run-to-run variation is what it measures),
    so its index is hashed with the body to keep its answers apart in the response log; replicate 1
    hashes the body alone, as every earlier version did, so existing logs are never paid for again.
    """
    payload: dict[str, Any] = body if replicate == 1 else {"oabench_replicate": replicate, "body": body}
    # surrogatepass: a lone surrogate in scraped text must not make hashing fail.
    return hashlib.sha256(canonical_json(payload).encode("utf-8", "surrogatepass")).hexdigest()


def messages_digest(messages: list[dict[str, str]]) -> Any:
    """SHA-256 state after the start of every canonical body holding `messages`: `{"messages":[...]`.

    "messages" sorts before every other key of a body (`build_request_body`), so one question's prompts are
    encoded and hashed once and every model's body continues from a copy (`hash_with_digest`): what
    `oabench status` and a no-op `oabench run` spend most of their time on, for thousands of cells."""
    encoded = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)  # as canonical
    return hashlib.sha256(('{"messages":' + encoded).encode("utf-8", "surrogatepass"))


def hash_with_digest(digest: Any, body: dict[str, Any]) -> str:
    """`request_hash(body)` (replicate 1) from `messages_digest(body["messages"])`: the same hex digest."""
    return hash_with_suffix(digest, body_suffix(body))


def body_suffix(body: dict[str, Any]) -> bytes:
    """What follows the messages in the canonical JSON of `body`: the model's part of it (id, sampling
    parameters), the same for every question asked of one model, so encoded once per model, not per question."""
    rest = canonical_json({key: value for key, value in body.items() if key != "messages"})
    return ("," + rest[1:]).encode("utf-8", "surrogatepass")


def hash_with_suffix(digest: Any, suffix: bytes) -> str:
    """`request_hash(body)` (replicate 1) from `messages_digest(body["messages"])` and `body_suffix(body)`."""
    continued = digest.copy()
    continued.update(suffix)
    return continued.hexdigest()

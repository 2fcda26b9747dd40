"""Secrets out of every text we keep: the API key and secret header values, in every common form.

A gateway that echoes the key back rarely echoes it verbatim. Redaction therefore finds, for each
secret, case-insensitively:

- the secret itself, with or without `Bearer ` before it;
- any mix of its characters percent-encoded (`%2D`, `%2d`), JSON-escaped (`\\u002d`, `\\/`) or written as
  HTML character references (`&#45;`, `&#x2d;`): the text is searched in a decoded copy whose positions
  map back to the original;
- its base64, standard or URL-safe, padded or not, at each of the three byte alignments, so the key is
  found inside a longer base64 string too: `base64("Bearer <key>")`, Basic auth's `base64("<user>:<key>")`,
  a token that embeds it. The whole base64 run holding it is replaced, not just the characters that
  encode whole bytes of the key (those at its edges carry a few of its bits).

Every match becomes `***`. The client applies this to every text a reply or an error carries before it
reaches a `ChatResult`, an exception or a log line (`client.py`), so the response log, the `inferences`
table, the terminal and Dagster's event log never receive a secret.
"""

from __future__ import annotations

import base64
import bisect
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from oabench_pipeline.inference.types import REDACTED

# Below this many characters, a base64 fragment of a secret could match unrelated base64 by chance.
MIN_BASE64_CORE = 8
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]*={0,2}")
_BASE64_RUN_BACK = re.compile(r"[A-Za-z0-9+/_-]*")
# Escapes a gateway may have put the secret's characters through; decoded before searching.
# A backslash escape may be escaped again (JSON inside a JSON string: `\\u0073`): all its backslashes go.
_ESCAPE = re.compile(
    r"%([0-9A-Fa-f]{2})|\\+u([0-9A-Fa-f]{4})|\\+(/)|&#([0-9]{1,7});|&#[xX]([0-9A-Fa-f]{1,6});"
)


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """`text` with every form of every secret (see the module docstring) replaced by `***`."""
    finder = _finder(tuple(sorted({s for s in secrets if s}, key=lambda s: (-len(s), s))))
    if finder is None or not text:
        return text
    decoded = _Decoded.of(text)
    spans = [(match.start(), match.end()) for match in finder.plain.finditer(decoded.text)]
    for match in finder.base64.finditer(decoded.text):
        # The whole base64 run around the fragment: its edge characters encode bits of the secret too.
        start = match.start() - len(_trailing_run(decoded.text[max(0, match.start() - 4096) : match.start()]))
        after = _BASE64_RUN.match(decoded.text, match.end())
        spans.append((start, match.end() + (len(after.group()) if after else 0)))
    if not spans:
        return text
    return _replace(text, [decoded.original_span(s, e) for s, e in spans])


def _trailing_run(head: str) -> str:
    """The base64 characters that end `head` (the caller passes at most 4 KiB before the match)."""
    reversed_run = _BASE64_RUN_BACK.match(head[::-1])
    return reversed_run.group() if reversed_run else ""


def _replace(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with the (possibly overlapping) spans each replaced by `***`, merged where they touch."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces, last = [], 0
    for start, end in merged:
        pieces += [text[last:start], REDACTED]
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


@dataclass(frozen=True)
class _Finder:
    plain: re.Pattern[str]
    base64: re.Pattern[str]


@functools.lru_cache(maxsize=64)
def _finder(secrets: tuple[str, ...]) -> _Finder | None:
    """The regexes of all secrets (longest first, so a secret holding another goes whole)."""
    if not secrets:
        return None
    spellings = [s for secret in secrets for s in _spellings(secret)]
    plain = r"(?:bearer\s+)?(?:" + "|".join(re.escape(s) for s in spellings) + ")"
    cores = sorted({core for secret in secrets for core in _base64_cores(secret)}, key=len, reverse=True)
    base64_pattern = "|".join(re.escape(core) for core in cores) or r"(?!)"
    return _Finder(re.compile(plain, re.IGNORECASE), re.compile(base64_pattern))


def _spellings(secret: str) -> list[str]:
    """The secret, and its UTF-8 bytes read one per character (how percent-decoding spells non-ASCII)."""
    as_bytes = secret.encode("utf-8").decode("latin-1")
    return list(dict.fromkeys([secret, as_bytes]))


def _base64_cores(secret: str) -> list[str]:
    """What base64 of any text holding `secret` must contain: for each of the three byte alignments, the
    characters that encode only the secret's bytes (standard and URL-safe alphabets)."""
    data = secret.encode("utf-8")
    cores: list[str] = []
    for skip in range(3):  # bytes of the secret before the first 3-byte group boundary
        whole = data[skip:]
        whole = whole[: len(whole) - len(whole) % 3]
        if len(whole) * 4 // 3 < MIN_BASE64_CORE:
            continue
        cores.append(base64.b64encode(whole).decode("ascii"))
        cores.append(base64.urlsafe_b64encode(whole).decode("ascii"))
    return list(dict.fromkeys(cores))


@dataclass(frozen=True)
class _Decoded:
    """`text` with its escapes decoded, and where each decoded position came from."""

    text: str
    original: str
    decoded_starts: list[int]  # start, in `text`, of each piece
    original_starts: list[int]  # start, in `original`, of the same piece
    escaped: list[bool]  # the piece is one decoded escape (one character standing for several)

    @classmethod
    def of(cls, original: str) -> _Decoded:
        if not _ESCAPE.search(original):
            return cls(original, original, [0], [0], [False])
        pieces: list[str] = []
        decoded_starts, original_starts, escaped = [], [], []
        position = length = 0
        for match in _ESCAPE.finditer(original):
            if match.start() > position:
                decoded_starts.append(length)
                original_starts.append(position)
                escaped.append(False)
                pieces.append(original[position : match.start()])
                length += match.start() - position
            character = _unescape(match)
            decoded_starts.append(length)
            original_starts.append(match.start())
            escaped.append(True)
            pieces.append(character)
            length += len(character)
            position = match.end()
        decoded_starts.append(length)
        original_starts.append(position)
        escaped.append(False)
        pieces.append(original[position:])
        return cls("".join(pieces), original, decoded_starts, original_starts, escaped)

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The span of `original` that decodes to `text[start:end]`, escapes at its edges taken whole."""
        first = bisect.bisect_right(self.decoded_starts, start) - 1
        if self.escaped[first]:
            begin = self.original_starts[first]
        else:
            begin = self.original_starts[first] + start - self.decoded_starts[first]
        if end <= start:
            return begin, begin
        last = bisect.bisect_right(self.decoded_starts, end - 1) - 1
        if self.escaped[last]:  # an escape piece is never the last piece: a literal one follows
            return begin, self.original_starts[last + 1]
        return begin, self.original_starts[last] + end - self.decoded_starts[last]


def _unescape(match: re.Match[str]) -> str:
    percent, unicode, slash, decimal, hexadecimal = match.groups()
    if percent is not None:
        return chr(int(percent, 16))
    if unicode is not None:
        return chr(int(unicode, 16))
    if slash is not None:
        return "/"
    code = int(decimal, 10) if decimal is not None else int(hexadecimal, 16)
    return chr(code) if code <= 0x10FFFF else "\ufffd"

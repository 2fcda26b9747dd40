"""Turn a model's reply into a letter A-D: OABench's published rules (v1) and an improved, opt-in v2.

Every parsed answer is stored with the parser version that produced it, so results made under
different rules are never silently mixed. Two readings per reply:
- strict: the reply is exactly one letter (format compliance, as the direct prompt demands);
- lenient: the best letter that can be extracted from the reply (used for scoring).

`oabench-v1` reproduces the original TypeScript parser of the OABench study exactly, including its
JavaScript regex semantics, so that published runs re-parse to the very same answers:
- JS `String.prototype.trim` and regex `\\s` use a fixed whitespace set (`_JS_WS`), not Python's
  `str.isspace` (which also counts U+001C..U+001F and U+0085, and not U+FEFF);
- JS `\\b` without the `u` flag is an ASCII word boundary: "é" counts as a non-word character;
- JS `/i` without `u` never matches a non-ASCII character to an ASCII one (Python's IGNORECASE lets "ſ"
  match "s"), so case-insensitivity is spelled out as explicit `[xX]` classes instead of a flag.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict

from oabench_pipeline.core.records import Letter

ParserVersion = Literal["oabench-v1", "oabench-v2"]
PARSER_VERSION: ParserVersion = "oabench-v1"
PARSER_VERSION_V2: ParserVersion = "oabench-v2"
PARSER_VERSIONS: tuple[ParserVersion, ...] = ("oabench-v1", "oabench-v2")


class ParsedAnswer(BaseModel):
    """The strict and lenient readings of one reply. Invariant: strict is None or strict == lenient."""

    model_config = ConfigDict(frozen=True)

    strict: Letter | None
    lenient: Letter | None


# ---------------------------------------------------------------------------------------------------------
# oabench-v1: the published rules, with JavaScript semantics
# ---------------------------------------------------------------------------------------------------------

# ECMAScript WhiteSpace + LineTerminator: what both `trim()` and `\s` (non-unicode regex) cover.
_JS_WS = (
    "\t\n\x0b\x0c\r \xa0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + ("\u2028\u2029\u202f\u205f\u3000\ufeff")
)
_WS = "[" + re.escape(_JS_WS) + "]"
# JS `\w` without the `u` flag is ASCII only; `\b` is built from it.
_NOT_AFTER_WORD = r"(?<![A-Za-z0-9_])"
_NOT_BEFORE_WORD = r"(?![A-Za-z0-9_])"
_LETTER = "([A-Da-d])"


def _ci(word: str) -> str:
    """A regex matching `word` case-insensitively the way JS `/i` does (no ASCII/non-ASCII crossover)."""
    parts = []
    for ch in word:
        lower, upper = ch.lower(), ch.upper()
        if lower != upper and len(lower) == 1 and len(upper) == 1:
            parts.append(f"[{re.escape(lower)}{re.escape(upper)}]")
        else:
            parts.append(re.escape(ch))
    return "".join(parts)


_V1_STRICT = re.compile(r"[A-Da-d][.)]?")
_V1_FINAL_ANSWER = re.compile(_ci("FINAL_ANSWER:") + _WS + "*" + _LETTER)
_V1_KEYWORDS = ("resposta", "alternativa", "letra", "answer", "opção", "opcao")
_V1_KEYWORD = re.compile(
    "(?:"
    + "|".join(_ci(k) for k in _V1_KEYWORDS)
    + ")"
    + "["
    + re.escape(_JS_WS)
    + ":]*"
    + _LETTER
    + _NOT_BEFORE_WORD
)
_V1_LONE_LINE = re.compile(_LETTER + "[.):" + re.escape(_JS_WS) + "]*")
_V1_STANDALONE = re.compile(_NOT_AFTER_WORD + _LETTER + _NOT_BEFORE_WORD)


def _js_trim(text: str) -> str:
    """`String.prototype.trim`: strip the ECMAScript whitespace set from both ends."""
    return text.strip(_JS_WS)


def _upper_letter(letter: str) -> Letter:
    return cast(Letter, letter.upper())


def parse_strict(text: str) -> Letter | None:
    """v1 strict: the whole reply (whitespace aside) is one letter A-D, any case, optionally then `.` or `)`."""
    match = _V1_STRICT.fullmatch(_js_trim(text))
    return _upper_letter(match.group(0)[0]) if match else None


def _v1_last_line_letter(text: str) -> Letter | None:
    """Rule 3: the last non-empty line (split on "\\n" only, as in JS) is a letter plus `.`, `)`, `:`, spaces."""
    lines = [line for line in _js_trim(text).split("\n") if _js_trim(line)]
    if not lines:
        return None
    match = _V1_LONE_LINE.fullmatch(_js_trim(lines[-1]))
    return _upper_letter(match.group(1)) if match else None


def parse_lenient(text: str) -> Letter | None:
    """v1 lenient, first rule that matches wins:

    1. `FINAL_ANSWER:` (any case), optional whitespace, a letter (no boundary needed after it);
    2. a keyword (resposta, alternativa, letra, answer, opção, opcao; any case, may sit inside a longer
       word) followed by any run of whitespace/colons and a letter that ends a word: "Resposta: C",
       "alternativa B"; but "alternativa (B)" does not match here (parenthesis) and falls through;
    3. the last non-empty line is a lone letter, possibly followed by `.`, `)`, `:` or spaces;
    4. the first standalone letter (ASCII word boundaries), lower case included: the article "a" counts.
    """
    if not _js_trim(text):
        return None
    for pattern in (_V1_FINAL_ANSWER, _V1_KEYWORD):
        match = pattern.search(text)
        if match:
            return _upper_letter(match.group(1))
    last_line = _v1_last_line_letter(text)
    if last_line is not None:
        return last_line
    match = _V1_STANDALONE.search(text)
    return _upper_letter(match.group(1)) if match else None


def _parse_v1(text: str) -> ParsedAnswer:
    return ParsedAnswer(strict=parse_strict(text), lenient=parse_lenient(text))


# ---------------------------------------------------------------------------------------------------------
# oabench-v2: opt-in improvements for replies v1 misreads
# ---------------------------------------------------------------------------------------------------------

_THINK_BLOCK = re.compile(r"<(think|thinking)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.IGNORECASE)
_MARKDOWN_EMPHASIS = re.compile(r"[*`]")
_V2_FINAL_ANSWER = re.compile(
    r"(?i:FINAL[_ ]ANSWER)\s*[:=]?\s*(?:(?i:letra|alternativa|op[çc][ãa]o)\s*)?[(\[]?([A-Da-d])(?!\w)"
)
_V2_LONE_LINE = re.compile(
    r"(?:(?i:resposta|letra|alternativa|answer|op[çc][ãa]o)\s*[:\-–=]?\s*)?[(\[]?([A-Da-d])[.):\]\s]*"
)
_V2_CHOICE_ECHO = re.compile(r"\s*\(?([A-D])\s*[).:\-–]\s*\S")
_V2_ANSWER_KEYWORD = re.compile(
    r"(?<!\w)(?i:resposta|answer)(?:\s+(?i:correta|final|correct))?(?:\s+(?i:é|e|is))?\s*[:\-–=]?\s*"
    r"(?:(?i:a|the)\s+)?(?:(?i:letra|alternativa|op[çc][ãa]o|option)\s+)?[(\[]?([A-D])(?!\w)"
)
_V2_CHOICE_KEYWORD = re.compile(
    r"(?<!\w)(?i:alternativa|letra|op[çc][ãa]o|option)\s*[:\-–]?\s*[(\[]?([A-D])(?!\w)"
)
# An upper-case letter alone, but not the Portuguese article "A" opening a sentence ("A resposta ...").
_V2_STANDALONE = re.compile(r"(?<!\w)([A-D])(?!\w)(?!\s+[a-zà-ÿ])")


def strip_thinking(text: str) -> str:
    """Drop `<think>...</think>` blocks; text before a lone `</think>` or after an unclosed `<think>` too."""
    text = _THINK_BLOCK.sub("", text)
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opened = _THINK_OPEN.search(text)
    return text[: opened.start()] if opened else text


def _normalize_v2(text: str) -> str:
    """What v2 reads: thinking removed, markdown emphasis (`**D**`, `` `D` ``) unwrapped."""
    return _MARKDOWN_EMPHASIS.sub("", strip_thinking(text))


def _last_match(pattern: re.Pattern[str], text: str) -> Letter | None:
    matches = list(pattern.finditer(text))
    return _upper_letter(matches[-1].group(1)) if matches else None


def _first_match(pattern: re.Pattern[str], text: str) -> Letter | None:
    match = pattern.search(text)
    return _upper_letter(match.group(1)) if match else None


def _v2_last_line(text: str) -> Letter | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    match = _V2_LONE_LINE.fullmatch(lines[-1])
    return _upper_letter(match.group(1)) if match else None


def _v2_choice_echo(text: str) -> Letter | None:
    match = _V2_CHOICE_ECHO.match(text)
    return _upper_letter(match.group(1)) if match else None


def _parse_v2(text: str) -> ParsedAnswer:
    """v2: v1's strict rule on the normalized reply; lenient rules in the order that reads replies best.

    1. strict letter (after unwrapping, so `**D**` counts as format-compliant in v2); 2. the LAST `FINAL_ANSWER` (a model may restate the format before answering);
    3. a last line that is a lone letter, also "(C)", "Letra C", "Resposta: C" (a conclusion beats
    "alternativa A" mentioned while reasoning, which v1 would take); 4. a reply that repeats a choice,
    "D) texto..."; 5. the last "resposta/answer ... X"; 6. the first "alternativa/letra/opção X";
    7. the first upper-case standalone letter that is not a sentence-opening article.
    Only upper-case letters count from rule 4 on: lower-case "a" is the Portuguese article.
    """
    normalized = _normalize_v2(text)
    strict = parse_strict(normalized)
    if strict is not None:
        return ParsedAnswer(strict=strict, lenient=strict)
    lenient = (
        _last_match(_V2_FINAL_ANSWER, normalized)
        or _v2_last_line(normalized)
        or _v2_choice_echo(normalized)
        or _last_match(_V2_ANSWER_KEYWORD, normalized)
        or _first_match(_V2_CHOICE_KEYWORD, normalized)
        or _first_match(_V2_STANDALONE, normalized)
    )
    return ParsedAnswer(strict=None, lenient=lenient)


_PARSERS: dict[str, Callable[[str], ParsedAnswer]] = {
    "oabench-v1": _parse_v1,
    "oabench-v2": _parse_v2,
}


def parse_answer(text: str, version: str = PARSER_VERSION) -> ParsedAnswer:
    """Parse a reply with the named rule set (default: the published `oabench-v1`).

    Never raises for a str; raises ValueError for an unknown version, so a typo cannot silently score
    with other rules.
    """
    try:
        parser = _PARSERS[version]
    except KeyError:
        raise ValueError(f"unknown parser version {version!r}; known: {', '.join(PARSER_VERSIONS)}") from None
    return parser(text)

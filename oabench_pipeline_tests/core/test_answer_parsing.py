"""Answer parsing: oabench-v1 must reproduce every published answer; v2 is checked by example and property."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from oabench_pipeline.core.answer_parsing import (
    PARSER_VERSION,
    PARSER_VERSION_V2,
    PARSER_VERSIONS,
    ParsedAnswer,
    parse_answer,
    parse_lenient,
    parse_strict,
    strip_thinking,
)


class ParserDifference(BaseModel):
    """One reply two parser versions read differently (a review aid for a parser change, kept with its test)."""

    model_config = ConfigDict(frozen=True)

    index: int
    text: str
    old: ParsedAnswer
    new: ParsedAnswer


def compare_parser_versions(
    texts: Sequence[str], old: str = PARSER_VERSION, new: str = PARSER_VERSION_V2
) -> list[ParserDifference]:
    """The replies (with their position in `texts`) whose strict or lenient reading differs between versions.

    Meant for reviewing a parser change before adopting it: every changed answer is listed, none hidden.
    """
    differences = []
    for index, text in enumerate(texts):
        old_answer, new_answer = parse_answer(text, old), parse_answer(text, new)
        if old_answer != new_answer:
            differences.append(ParserDifference(index=index, text=text, old=old_answer, new=new_answer))
    return differences


def _published_lines(shared_oab: Path) -> list[dict]:
    lines = []
    for path in sorted((shared_oab / "published-runs").glob("*/inferences.jsonl")):
        lines += [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines() if text.strip()]
    return lines


def test_v1_reproduces_every_published_parsed_answer(shared_oab: Path) -> None:
    records = _published_lines(shared_oab)
    mismatches = [
        (r["qid"], r["model"], r["rawResponse"][:80], r["parsedAnswer"])
        for r in records
        if (parse_strict(r["rawResponse"]), parse_lenient(r["rawResponse"]))
        != (r["parsedAnswer"]["strict"], r["parsedAnswer"]["lenient"])
    ]
    assert not mismatches, f"{len(mismatches)} of {len(records)} published records parse differently"
    # The 5 published runs hold 984 lines; some must exercise more than the bare-letter path.
    assert len(records) == 984
    lenient_only = [
        r for r in records if r["parsedAnswer"]["strict"] is None and r["parsedAnswer"]["lenient"]
    ]
    assert len(lenient_only) >= 3


# Expected values are what the original OABench TypeScript parser returns (checked by running it under
# Node): they pin down its JavaScript semantics, including its known weaknesses.
V1_CASES = [
    ("Resposta: C", None, "C"),
    ("RESPOSTA :: d", None, "D"),  # keyword any case, any run of spaces/colons
    ("respostaB", None, "B"),  # no boundary needed before the letter ...
    ("resposta Bx", None, None),  # ... but one after it
    ("A alternativa (B) é a correta", None, "A"),  # "(" stops rule 2; rule 4 takes the article "A"
    ("a resposta é D", None, "A"),  # "é" is no letter for rule 2; lower-case "a" is standalone
    ("FINAL_ANSWER: Alternativa C", None, "A"),  # rule 1 takes the letter right after the colon
    ("final_answer:b", None, "B"),
    ("Letra A\nB", None, "A"),  # rule 2 beats the last line
    ("Análise longa\nB", None, "B"),
    ("Y\nc):", None, "C"),
    ("alternativas B e C", None, "B"),
    ("Opção D", None, "D"),
    ("éa", None, "A"),  # JS \b is ASCII: "é" is a non-word character
    ("1A B", None, "B"),  # digits are word characters
    ("_A C", None, "C"),
    ("x a reſposta: d", None, "A"),  # JS /i never matches "ſ" to "s" (Python's IGNORECASE would)
    ("B)", "B", "B"),
    ("b.", "B", "B"),
    (" C \n", "C", "C"),
    ("B\r\n", "B", "B"),
    ("\ufeffB\ufeff", "B", "B"),  # JS trim strips the BOM ...
    ("B\x85", None, "B"),  # ... but not NEL, which Python's strip() would remove
    ("\u2028B\u2028", "B", "B"),
    ("C.)", None, "C"),
    ("D:", None, "D"),
    ("A\nB\n\n", None, "B"),
    ("**D**", None, "D"),
    ("", None, None),
    (" \n\t", None, None),
    ("Não sei.", None, None),
]


@pytest.mark.parametrize(("text", "strict", "lenient"), V1_CASES)
def test_v1_follows_the_original_rules(text: str, strict: str | None, lenient: str | None) -> None:
    assert parse_answer(text) == ParsedAnswer(strict=strict, lenient=lenient)
    assert parse_answer(text, "oabench-v1") == parse_answer(text)


V2_CASES = [
    ("**D**", "D", "D"),
    ("`B`", "B", "B"),
    ("D) O contrato é nulo, pois a alternativa A está errada", None, "D"),
    ("<think>A alternativa A parece certa</think>\nC", "C", "C"),
    ("<think>truncated reasoning A B", None, None),
    ("reasoning A</think>B", "B", "B"),
    ("A resposta é B", None, "B"),
    ("Resposta: a alternativa D", None, "D"),
    ("alternativa A incorreta; alternativa B incorreta.\n\nC", None, "C"),
    ("FINAL_ANSWER: <letra>\nAnálise...\nFINAL_ANSWER: **B**", None, "B"),
    ("FINAL_ANSWER: Alternativa C", None, "C"),
    ("Letra C", None, "C"),
    ("A resposta correta não consta.", None, None),
    ("b.", "B", "B"),
]


@pytest.mark.parametrize(("text", "strict", "lenient"), V2_CASES)
def test_v2_reads_what_v1_misreads(text: str, strict: str | None, lenient: str | None) -> None:
    assert parse_answer(text, "oabench-v2") == ParsedAnswer(strict=strict, lenient=lenient)


def test_strip_thinking_keeps_only_the_answer_part() -> None:
    assert strip_thinking("<think>x</think> D <THINK>y</THINK>") == " D "
    assert strip_thinking("no tags") == "no tags"


def test_unknown_version_is_refused() -> None:
    with pytest.raises(ValueError, match="oabench-v9"):
        parse_answer("A", "oabench-v9")


def test_compare_versions_lists_changed_replies_only(shared_oab: Path) -> None:
    texts = [r["rawResponse"] for r in _published_lines(shared_oab)]
    assert compare_parser_versions(texts, PARSER_VERSION, PARSER_VERSION) == []
    differences = compare_parser_versions(texts)
    # On the real replies v2 only changes markdown-wrapped letters, and only their strict reading:
    # the scored (lenient) answers of the published runs stay the same.
    assert {d.index for d in differences} == {i for i, t in enumerate(texts) if "**" in t}
    assert all(d.old.lenient == d.new.lenient and d.old.strict is None for d in differences)
    assert all(d.text == texts[d.index] for d in differences)


# Property tests: both versions, arbitrary text and text built from the tokens the rules look for.
_TOKENS = [
    *"ABCDabcd .):(\n\r\t*`_1é",
    "\ufeff",
    "\u00a0",
    "\x85",
    "Resposta",
    "alternativa",
    "letra",
    "opção",
    "FINAL_ANSWER:",
    "final answer",
    "<think>",
    "</think>",
    "**",
    "ſ",
]
_REPLIES = st.one_of(st.text(), st.lists(st.sampled_from(_TOKENS), max_size=12).map("".join))


@settings(max_examples=400, deadline=None)
@given(text=_REPLIES, version=st.sampled_from(PARSER_VERSIONS))
def test_parsing_never_raises_and_strict_implies_lenient(text: str, version: str) -> None:
    parsed = parse_answer(text, version)
    assert parsed.strict in (None, "A", "B", "C", "D")
    assert parsed.lenient in (None, "A", "B", "C", "D")
    if parsed.strict is not None:
        assert parsed.lenient == parsed.strict


@settings(max_examples=200, deadline=None)
@given(
    letter=st.sampled_from("ABCDabcd"),
    suffix=st.sampled_from(["", ".", ")"]),
    pad=st.sampled_from(["", " ", "\n"]),
)
def test_a_lone_letter_is_strict_in_every_version(letter: str, suffix: str, pad: str) -> None:
    for version in PARSER_VERSIONS:
        assert parse_answer(f"{pad}{letter}{suffix}{pad}", version).strict == letter.upper()

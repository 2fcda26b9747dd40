"""Offline baselines: the floor a model has to beat, answered with no API call.

A baseline's raw response is just its letter, so it goes through the same parsing and scoring as a model.
"""

from __future__ import annotations

import hashlib

from oabench_pipeline.core.records import LETTERS, Letter

RANDOM_BASELINE_ID = "baseline/random"
LONGEST_CHOICE_BASELINE_ID = "baseline/longest-choice"
BASELINE_IDS: tuple[str, ...] = (RANDOM_BASELINE_ID, LONGEST_CHOICE_BASELINE_ID)


def random_baseline_answer(qid: str, seed: int = 0) -> Letter:
    """A uniformly distributed letter that depends only on (qid, seed).

    Derived from SHA-256 rather than `random`/`hash()`, which differ between processes and Python
    versions: a re-run, or another machine, must give the same answers. The digest is 256 bits, so taking
    it modulo 4 is unbiased.
    """
    digest = hashlib.sha256(f"{seed}:{qid}".encode()).digest()
    return LETTERS[int.from_bytes(digest, "big") % len(LETTERS)]


def longest_choice_answer(choices: dict[Letter, str]) -> Letter:
    """The letter of the longest choice text (a known test-taking heuristic); ties go to the first letter.

    Length is counted on the stripped text, so stray extraction whitespace does not decide the answer.
    Raises ValueError when `choices` holds no letter A-D.
    """
    present = [letter for letter in LETTERS if letter in choices]
    if not present:
        raise ValueError("longest_choice_answer needs at least one of the choices A-D")
    # max() keeps the first of equal keys, and `present` is in A-D order: ties go to the first letter.
    return max(present, key=lambda letter: len(choices[letter].strip()))


def baseline_answer(baseline_id: str, qid: str, choices: dict[Letter, str], seed: int = 0) -> Letter:
    """Dispatch on a registry id (`baseline/random`, `baseline/longest-choice`)."""
    if baseline_id == RANDOM_BASELINE_ID:
        return random_baseline_answer(qid, seed)
    if baseline_id == LONGEST_CHOICE_BASELINE_ID:
        return longest_choice_answer(choices)
    raise ValueError(f"unknown baseline {baseline_id!r}; known: {', '.join(BASELINE_IDS)}")

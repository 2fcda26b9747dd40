"""Synthetic OABench run folders in the published format, built from the real ones in `../shared/oab`.

The shared folder holds 5 of the 22 published run folders; the shapes the whole folder has (a rerun
weeks later, aborted runs, a run with unretried errors and no summary, one key completed by two
folders) are made here from real lines, so the import and the run rules are tested on them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

GROK_STUDY = "2026-03-03T18-05-25-435Z_x-ai--grok-4.1-fast_direto"
DEEPSEEK_STUDY = "2026-03-03T16-55-22-893Z_deepseek--deepseek-v3.2_direto"
HAIKU_STUDY = "2026-03-03T18-01-17-579Z_anthropic--claude-haiku-4.5_direto"

GROK_RERUN = "2026-03-24T10-00-00-000Z_x-ai--grok-4.1-fast_direto"
GROK_ABORTED = "2026-03-25T09-00-00-000Z_x-ai--grok-4.1-fast_direto"
ERRORED_RUN = "2026-03-03T17-30-00-000Z_z-ai--glm-5_direto"
SPLIT_FIRST = "2026-03-03T15-00-00-000Z_acme--split-model_direto"
SPLIT_SECOND = "2026-03-03T17-40-00-000Z_acme--split-model_direto"
FLIPPED = 3  # answers the Grok rerun gets wrong that the study's run got right


def _lines(run_dir: Path) -> list[dict[str, Any]]:
    return [
        json.loads(t) for t in (run_dir / "inferences.jsonl").read_text(encoding="utf-8").splitlines() if t
    ]


def _write(
    root: Path,
    run_id: str,
    model: str,
    lines: list[dict[str, Any]],
    summary: dict[str, Any] | None,
    editions: list[int],
) -> Path:
    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    config = {
        "runId": run_id,
        "model": model,
        "protocol": "direto",
        "reasoningMode": "none",
        "editions": editions,
    }
    (run_dir / "config.json").write_text(json.dumps(config), encoding="utf-8")
    text = "".join(json.dumps({**line, "model": model}) + "\n" for line in lines)
    (run_dir / "inferences.jsonl").write_text(text, encoding="utf-8")
    if summary is not None:
        (run_dir / "summary.json").write_text(
            json.dumps({**summary, "runId": run_id, "model": model}), encoding="utf-8"
        )
    return run_dir


def _moved(lines: list[dict[str, Any]], day: str) -> list[dict[str, Any]]:
    return [{**line, "timestamp": day + line["timestamp"][10:]} for line in lines]


def _with_answer(line: dict[str, Any], letter: str) -> dict[str, Any]:
    return {**line, "rawResponse": letter, "parsedAnswer": {"strict": letter, "lenient": letter}}


def flipped_qids(published: Path) -> list[str]:
    """The first FLIPPED active questions of edition 43 the study's Grok run answered correctly."""
    scored = [
        json.loads(t)
        for t in (published / GROK_STUDY / "scored.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    right = [s["qid"] for s in scored if s["edition"] == 43 and s.get("isCorrectTechnical") is True]
    return sorted(right)[:FLIPPED]


def build_run_folders(published: Path, root: Path) -> Path:
    """The real Grok, DeepSeek and Haiku study runs plus the synthetic shapes, under `root`."""
    root.mkdir(parents=True, exist_ok=True)
    for name in (GROK_STUDY, DEEPSEEK_STUDY, HAIKU_STUDY):
        shutil.copytree(published / name, root / name)

    grok = _lines(published / GROK_STUDY)
    grok_summary = json.loads((published / GROK_STUDY / "summary.json").read_text(encoding="utf-8"))
    correct = {
        s["qid"]: s["correctAnswer"]
        for s in map(
            json.loads, (published / GROK_STUDY / "scored.jsonl").read_text(encoding="utf-8").splitlines()
        )
    }
    flips = set(flipped_qids(published))
    rerun = [
        _with_answer(line, next(x for x in "ABCD" if x != correct[line["qid"]]))
        if line["qid"] in flips
        else line
        for line in _moved(grok, "2026-03-24")
    ]
    rerun_summary = {**grok_summary, "completedAt": "2026-03-24T10:05:00.000Z"}
    _write(root, GROK_RERUN, "x-ai/grok-4.1-fast", rerun, rerun_summary, [43, 44, 45])
    # Started after the rerun, stopped after 30 answers: no summary, so never canonical.
    _write(root, GROK_ABORTED, "x-ai/grok-4.1-fast", _moved(grok, "2026-03-25")[:30], None, [43, 44, 45])

    # A full run whose one API error and one empty reply were never retried: OABench wrote no summary.
    deepseek = _lines(published / DEEPSEEK_STUDY)
    active = [i for i, line in enumerate(deepseek) if not line["skipped"]]
    errored = list(deepseek)
    no_answer = {"rawResponse": "", "parsedAnswer": {"strict": None, "lenient": None}}
    errored[active[0]] = {**errored[active[0]], **no_answer, "error": "HTTP 502: upstream error"}
    errored[active[1]] = {**errored[active[1]], **no_answer}
    _write(root, ERRORED_RUN, "z-ai/glm-5", errored, None, [43, 44, 45])

    # One key completed by two folders: edition 45 first, then 43-44 (as GPT-5 Mini's study result).
    haiku = _lines(published / HAIKU_STUDY)
    haiku_summary = json.loads((published / HAIKU_STUDY / "summary.json").read_text(encoding="utf-8"))
    first = [line for line in haiku if line["edition"] == 45]
    second = [line for line in haiku if line["edition"] != 45]

    def only(editions: set[int]) -> dict[str, Any]:
        return {
            **haiku_summary,
            "editions": [e for e in haiku_summary["editions"] if e["edition"] in editions],
        }

    _write(
        root,
        SPLIT_FIRST,
        "acme/split-model",
        first,
        only({45}) | {"completedAt": "2026-03-03T15:10:00.000Z"},
        [45],
    )
    _write(
        root,
        SPLIT_SECOND,
        "acme/split-model",
        second,
        only({43, 44}) | {"completedAt": "2026-03-03T17:50:00.000Z"},
        [43, 44],
    )
    return root


HTML_RUN = "2026-03-03T19-00-00-000Z_acme--html-echo_direto"
HTML_MODEL = "acme/html-echo"
HTML_MARKUP = "<script>window.pwned = true</script><b>negrito</b> "


def html_reply_run(published: Path, root: Path) -> Path:
    """A complete run whose every reply wraps the Haiku study's letter in HTML (`<script>`, `<b>`).

    Model output is untrusted text: a page that shows a reply must show these characters, not run them.
    The letter stays last, so the replies parse to the study's answers (lenient) and to none (strict).
    """
    haiku = _lines(published / HAIKU_STUDY)
    summary = json.loads((published / HAIKU_STUDY / "summary.json").read_text(encoding="utf-8"))
    wrapped = [
        line
        if line["skipped"]
        else {
            **line,
            "rawResponse": HTML_MARKUP + line["rawResponse"],
            "parsedAnswer": {**line["parsedAnswer"], "strict": None},
        }
        for line in haiku
    ]
    return _write(
        root,
        HTML_RUN,
        HTML_MODEL,
        wrapped,
        {**summary, "completedAt": "2026-03-03T19:10:00.000Z"},
        [43, 44, 45],
    )

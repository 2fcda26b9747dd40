"""The Markdown documentation holds together: the README's two commands stay first (CI runs the second one
verbatim), every relative link and `#anchor` of the README, ARCHITECTURE.md and `docs/` resolves, and the
pages stay short to read (prose lines, ARCHITECTURE.md's size)."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP_PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "oabench_pipeline_tests" / "README.md"]
PAGES = [*TOP_PAGES, *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "benchmarks").glob("*.md"))]
PROSE_LINE_LIMIT = 120  # prose is wrapped at 110; a line up to 120 is tolerated, not the norm
ARCHITECTURE_MAX_BYTES = 12_000
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def slugs(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as hyphens, a
    repeated heading numbered."""
    seen: dict[str, int] = {}
    anchors = set()
    for line in FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        if not (match := re.match(r"#{1,6} +(.*?) *#*$", line)):
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).lower()).replace(" ", "-")
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def links(page: Path) -> list[str]:
    text = CODE_SPAN.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


def test_the_readme_opens_with_one_sentence_then_its_two_commands_and_ci_runs_the_second_verbatim() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    title, opening, commands = text.split("\n\n", 3)[:3]
    assert title.startswith("# ") and "\n" not in title
    sentence = " ".join(opening.split())
    assert sentence.endswith(".") and ". " not in sentence.removesuffix("."), opening
    fence, main_command, test_command, closing = commands.splitlines()
    assert (fence, closing) == ("```bash", "```")
    assert main_command.startswith("scripts/setup && ") and "/oabench ingest " in main_command
    assert test_command.startswith("scripts/setup --dev && ") and test_command.endswith(
        " .venv/bin/pytest -q"
    )
    assert test_command in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_the_setup_script_is_an_executable_strict_shell_script() -> None:
    """The README's commands start with it: it must run as a program and stop at the first failing step."""
    setup = ROOT / "scripts" / "setup"
    assert setup.stat().st_mode & 0o111
    lines = setup.read_text(encoding="utf-8").splitlines()
    assert lines[0] in ("#!/bin/sh", "#!/usr/bin/env bash", "#!/bin/bash")
    assert "set -eu" in lines


def test_ci_runs_every_marker_the_default_run_leaves_out() -> None:
    """A test left out of `pytest -q` (`-m 'not …'` in `addopts`) still runs on every landing: `.ci/run`
    runs each such marker after the README's command."""
    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"][
        "ini_options"
    ]["addopts"]
    selection = re.search(r"-m '([^']*)'", addopts)
    assert selection is not None, addopts
    left_out = re.findall(r"\bnot (\w+)", selection.group(1))
    assert "slow" in left_out
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    missing = [m for m in left_out if not re.search(rf"^\.venv/bin/pytest -q -m {m}\b", ci, re.MULTILINE)]
    assert not missing, f".ci/run runs no `pytest -q -m ...` for {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in slugs(linked):
            broken.append(f"{target}: no heading with that anchor in {linked.name}")
    assert not broken, broken


def test_every_docs_page_is_reachable_from_the_readme() -> None:
    readme = set(links(ROOT / "README.md"))
    assert not [p.name for p in (ROOT / "docs").glob("*.md") if f"docs/{p.name}" not in readme]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_dagster_asset_materialize_names_the_module(page: Path) -> None:
    """`dagster asset materialize` loads no code location by itself: without `-m oabench_pipeline` it fails."""
    text = " ".join(page.read_text(encoding="utf-8").split())
    commands = re.findall(r"dagster asset materialize [^`|]*--select", text)
    assert [c for c in commands if "-m oabench_pipeline" not in c] == []


def test_the_pages_count_the_registry_s_editions() -> None:
    """The README and the commands page name as many editions as the registry pins."""
    registry = tomllib.loads((ROOT / "oabench_pipeline" / "registry" / "editions.toml").read_text("utf-8"))
    pinned = len(registry["editions"])
    for page in (ROOT / "README.md", ROOT / "docs" / "commands.md"):
        counts = {int(n) for n in re.findall(r"(\d+) editions", page.read_text(encoding="utf-8"))}
        assert counts <= {pinned}, (page.name, counts, pinned)


def test_the_models_file_models_add_writes_is_git_ignored() -> None:
    """`oabench models add` writes models.toml in the working directory: never committed by accident."""
    from oabench_pipeline.cli.models import USER_MODELS_FILE

    ignored = subprocess.run(
        ["git", "check-ignore", "-q", str(USER_MODELS_FILE)], cwd=ROOT, check=False
    ).returncode
    assert ignored == 0


def unbreakable(line: str) -> bool:
    """One word (a link's long address) or one image: no wrapping can shorten it."""
    return " " not in line or re.fullmatch(r"!\[[^\]]*\]\([^()\s]+\)", line) is not None


def prose_lines_over_the_limit(text: str) -> list[int]:
    """The numbers of the lines over PROSE_LINE_LIMIT outside code fences and table rows, unbreakable
    lines left alone."""
    found, in_fence = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("```"):
            in_fence = not in_fence
        elif len(line) > PROSE_LINE_LIMIT and not (
            in_fence or stripped.startswith("|") or unbreakable(stripped)
        ):
            found.append(number)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_prose_line_is_over_120_characters(page: Path) -> None:
    """Prose is wrapped at 110 columns; code fences and table rows are exempt."""
    lines = page.read_text(encoding="utf-8").splitlines()
    too_long = [
        f"line {n}: {len(lines[n - 1])} characters" for n in prose_lines_over_the_limit("\n".join(lines))
    ]
    assert too_long == []


def test_the_prose_check_sees_a_long_line_but_not_fences_tables_or_what_cannot_be_wrapped() -> None:
    prose = "word " * 30
    image = f"![{prose}](images/a.png)"
    page = ["```", prose, "```", f"| {prose} |", "  https://example.org/" + "x" * 130, image, "short", prose]
    assert prose_lines_over_the_limit("\n".join(page)) == [8]


def test_architecture_stays_under_its_size() -> None:
    """ARCHITECTURE.md is the map a newcomer reads first; design notes go to docs/design/, one per page."""
    size = len((ROOT / "ARCHITECTURE.md").read_bytes())
    assert size <= ARCHITECTURE_MAX_BYTES, f"ARCHITECTURE.md is {size} bytes"

"""The Markdown documentation holds together: the README's two commands stay first (CI runs the second one
verbatim), and every relative link and `#anchor` of the README, ARCHITECTURE.md and `docs/` resolves."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP_PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "oabench_pipeline_tests" / "README.md"]
PAGES = [*TOP_PAGES, *sorted((ROOT / "docs").glob("*.md"))]
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


def test_the_readme_starts_with_its_two_commands_and_ci_runs_the_second_verbatim() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert lines[2] == "```bash" and lines[5] == "```"
    main_command, test_command = lines[3], lines[4]
    assert main_command.startswith("python3 -m venv .venv && ") and "/oabench ingest " in main_command
    assert test_command.startswith("python3 -m venv .venv && ") and test_command.endswith(
        " .venv/bin/pytest -q"
    )
    assert test_command in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


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

"""Where each page of the static site lives, relative to the site folder (docs/site.md lists them).

Other tools print links to these paths (e.g. a question's page), so they are a public interface: keep them.
Every path is plain ASCII without `:` (Windows checkouts, GitHub Pages and `file://` all take it as is).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

INDEX = "index.html"
METHODOLOGY = "metodologia.html"
DATA = "dados.html"
STYLESHEET = "static/site.css"
CHARTS_DIR = "graficos"
DATA_DIR = "dados"
PHASE2_INDEX = "fase2/index.html"  # the 2nd phase's leaderboard, only when the warehouse has phase-2 items

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def slug(text: str) -> str:
    """A file name for a model key (or a suite): `/` → `--`, `:` → `__`, anything else unsafe → `-`."""
    return _UNSAFE.sub("-", text.replace("/", "--").replace(":", "__")).strip("-") or "-"


def model_slugs(model_keys: Iterable[str]) -> dict[str, str]:
    """Model key → its slug, unique: two keys that would share a slug both get a short hash of the key."""
    keys = sorted(set(model_keys))
    plain = {key: slug(key) for key in keys}
    taken: dict[str, int] = {}
    for value in plain.values():
        taken[value.lower()] = taken.get(value.lower(), 0) + 1  # case-insensitive file systems (macOS)
    return {
        key: value if taken[value.lower()] == 1 else f"{value}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"
        for key, value in plain.items()
    }


def model_page(model_slug: str) -> str:
    return f"modelo/{model_slug}.html"


def edition_page(edition: int) -> str:
    return f"edicao/{edition}.html"


def question_page(qid: str) -> str:
    return f"questao/{slug(qid)}.html"


def phase2_item_page(item_id: str) -> str:
    return f"fase2/item/{slug(item_id)}.html"


def suite_page(suite: str) -> str:
    return f"suite/{slug(suite)}.html"


def data_file(table: str, kind: str) -> str:
    return f"{DATA_DIR}/{table}.{kind}"


def chart(name: str) -> str:
    return f"{CHARTS_DIR}/{name}.svg"


def relative(from_page: str, to_path: str) -> str:
    """The link from one page to another path of the site (both relative to the site folder)."""
    depth = from_page.count("/")
    return "../" * depth + to_path

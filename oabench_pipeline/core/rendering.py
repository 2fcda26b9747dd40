"""The one way a page is rendered: Jinja2 templates (`oabench_pipeline/templates/`), autoescaping on.

Model replies, question text and model names are untrusted text: every value reaches the HTML escaped
(a reply `<script>…` shows as those characters), and templates mark nothing safe that came from data.
Used by the report (`core/reports.py`) and the site (`core/site/`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from typing import Any

import jinja2
import markupsafe

TEMPLATES_PACKAGE = "oabench_pipeline"
TEMPLATES_FOLDER = "templates"


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """Templates compiled once per process; `StrictUndefined` turns a misspelt name into an error."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(TEMPLATES_PACKAGE, TEMPLATES_FOLDER),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["code_spans"] = code_spans
    return env


_CODE_SPAN = re.compile(r"`([^`]+)`")


def code_spans(text: str) -> markupsafe.Markup:
    """Our own prose (the report's notes and times) with its Markdown `code` spans as `<code>`: escaped
    first, so nothing in `text` becomes markup but the spans."""
    escaped = str(markupsafe.escape(text))
    return markupsafe.Markup(_CODE_SPAN.sub(r"<code>\1</code>", escaped))


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def template_bytes(name: str) -> bytes:
    """A file shipped beside the templates as is (a stylesheet)."""
    return resources.files(TEMPLATES_PACKAGE).joinpath(TEMPLATES_FOLDER, name).read_bytes()

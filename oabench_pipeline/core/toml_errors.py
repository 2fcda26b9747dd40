"""Errors in TOML files people edit, as `file:line: field 'x': problem`, and the line finding behind them.

The models registry and the watch policy are validated with pydantic, which knows fields but not lines;
these helpers put the line back: TOML's own position for a syntax error, else the line where the field is
set inside its table, else the table's header line.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from pydantic import ValidationError

_TOML_POSITION = re.compile(r"\(at line (\d+), column \d+\)")
_KEY_ON_LINE = re.compile(r"^\s*\"?([A-Za-z0-9_-]+)\"?\s*=")


class TomlFileError(ValueError):
    """A TOML file that cannot be used; the message names the file, the line and the field."""

    def __init__(self, path: Path, line: int | None, field: str | None, problem: str) -> None:
        self.path, self.line, self.field, self.problem = path, line, field, problem
        where = f"{path}:{line}" if line is not None else str(path)
        what = f" field '{field}':" if field else ""
        super().__init__(f"{where}:{what} {problem}")


def table_spans(lines: list[str], header: re.Pattern[str]) -> list[tuple[int, int]]:
    """(first, last) 1-based line numbers of each table whose header matches, in file order."""
    starts = [i + 1 for i, line in enumerate(lines) if header.match(line)]
    ends = [s - 1 for s in starts[1:]] + [len(lines)]
    return list(zip(starts, ends, strict=True))


def field_line(lines: list[str], span: tuple[int, int] | None, field: str | None) -> int | None:
    """The line where `field` is set inside the table, else the table's header line (good enough)."""
    if span is None:
        return None
    first, last = span
    if field:
        pattern = re.compile(rf"^\s*\"?{re.escape(field)}\"?\s*=")
        for number in range(first, last + 1):
            if pattern.match(lines[number - 1]):
                return number
    return first


def syntax_error(
    error_type: type[TomlFileError], path: Path, lines: list[str], error: tomllib.TOMLDecodeError
) -> TomlFileError:
    """A TOML syntax error at the line TOML reports, naming the key set on that line if any."""
    found = _TOML_POSITION.search(str(error))
    line = int(found.group(1)) if found else len(lines)
    if line == 1 and lines and lines[0].startswith(BYTE_ORDER_MARK):  # editors on Windows add one
        return error_type(path, 1, None, BOM_PROBLEM)
    key = _KEY_ON_LINE.match(lines[line - 1]) if 0 < line <= len(lines) else None
    return error_type(path, line, key.group(1) if key else None, f"TOML syntax error: {error}")


BYTE_ORDER_MARK = "\ufeff"
BOM_PROBLEM = (
    "the file starts with a UTF-8 byte-order mark (BOM), which TOML does not allow: "
    "save it as UTF-8 without BOM"
)

NESTING_SHOWN = 100  # deeper than any file of ours; Python's TOML parser gives up at a few hundred levels


def nesting_error(error_type: type[TomlFileError], path: Path, lines: list[str]) -> TomlFileError:
    """The error for a file whose arrays or inline tables nest too deep for the TOML parser (it raises
    `RecursionError`): the line where the nesting passes `NESTING_SHOWN` levels, with the key set there."""
    depth, line = 0, len(lines)
    for number, text in enumerate(lines, start=1):
        # Brackets inside strings or comments count too: a near enough line, and files this deep are
        # hostile or broken, not hand-written with a `[` in a comment.
        depth += sum(text.count(c) for c in "[{") - sum(text.count(c) for c in "]}")
        if depth > NESTING_SHOWN:
            line = number
            break
    key = _KEY_ON_LINE.match(lines[line - 1]) if 0 < line <= len(lines) else None
    problem = f"TOML nested too deep to read (arrays or inline tables more than {NESTING_SHOWN} levels deep)"
    return error_type(path, line if lines else None, key.group(1) if key else None, problem)


def validation_error(
    error_type: type[TomlFileError],
    path: Path,
    lines: list[str],
    span: tuple[int, int] | None,
    error: ValidationError,
    table: str = "table",
) -> TomlFileError:
    """Report the first error (fields are checked in declaration order), with the count of the others."""
    errors = error.errors()
    # A key that could not be derived (because id, effort or web_search is wrong) is a consequence, not news.
    errors = [e for e in errors if e["loc"] != ("key",) or e["type"] != "missing"] or errors
    first = errors[0]
    field = str(first["loc"][0]) if first["loc"] else None
    others = len(errors) - 1
    more = f" (and {others} more problem{'s' if others > 1 else ''} in this {table})" if others else ""
    message = str(first["msg"]).removeprefix("Value error, ")  # pydantic's prefix for our own checks
    return error_type(path, field_line(lines, span, field), field, f"{message}{more}")

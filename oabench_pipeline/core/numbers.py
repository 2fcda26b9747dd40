"""How a figure is written where people read it, the same in every view (issue 21's "one truth").

The terminal (`oabench leaderboard`, `oabench sql`), the HTML and Markdown report and the site print a
cost with the same digits (`0.1812`, `0.00919`: small values keep 3 significant digits, so $0.000123
does not read 0) and a latency in whole milliseconds rounded half up (a median of two calls can end in
.5: 10036.5 ms reads 10037 everywhere it is rounded). csv, json and the downloads keep full precision.
"""

from __future__ import annotations

import math


def short_decimal(value: float) -> str:
    """4 decimals without trailing zeros; a non-zero value under 0.01 keeps 3 significant digits."""
    if value != value:  # NaN
        return "NaN"
    if value != 0 and abs(value) < 0.01:
        return f"{value:.3g}"
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def whole_ms(value: float) -> int:
    """Milliseconds rounded half up (Python's round() would take 10036.5 to 10036, banker's rounding)."""
    return math.floor(value + 0.5)

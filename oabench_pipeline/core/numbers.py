"""How a figure is written where people read it, the same in every view (issue 21's "one truth").

The terminal (`oabench leaderboard`, `oabench sql`), the HTML and Markdown report and the site print a
figure with the same digits: 4 decimals without trailing zeros, a non-zero value under 0.01 with 3
significant digits (so a cost of $0.000123 does not read 0): a cost `0.1812`, `0.00919`, a median latency
`10036.5` (a median of two calls ends in .5). The report and the site group thousands (`10,036.5 ms`;
Portuguese `10.036,5 ms`, `US$ 0,00919`). csv, json and the downloads keep full precision.
"""

from __future__ import annotations


def short_decimal(value: float) -> str:
    """4 decimals without trailing zeros; a non-zero value under 0.01 keeps 3 significant digits."""
    if value != value:  # NaN
        return "NaN"
    if value != 0 and abs(value) < 0.01:
        return f"{value:.3g}"
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def grouped(value: float, thousands: str = ",", decimal: str = ".") -> str:
    """`short_decimal`'s digits with the integer part grouped by thousands: 10036.5 → `10,036.5`."""
    text = short_decimal(value)
    if "e" in text or text == "NaN":  # 3 significant digits of a tiny value: nothing to group
        return text.replace(".", decimal)
    sign, text = ("-", text[1:]) if text.startswith("-") else ("", text)
    whole, _, fraction = text.partition(".")
    whole = f"{int(whole):,}".replace(",", thousands)
    return sign + whole + (decimal + fraction if fraction else "")

"""How a figure is written where people read it, the same in every view (issue 21's "one truth").

The terminal (`oabench leaderboard`, `oabench sql`), the HTML and Markdown report and the site print a
figure with the same digits: 4 decimals without trailing zeros, a non-zero value under 0.01 with 3
significant digits (so a cost of $0.000123 does not read 0): a cost `0.1812`, `0.00919`, a median latency
`10036.5` (a median of two calls ends in .5). The report and the site group thousands (`10,036.5 ms`;
Portuguese `10.036,5 ms`, `US$ 0,00919`). csv, json and the downloads keep every significant digit, but
not the binary noise of a float sum (`61481.54999999999` is written `61481.55`: `without_float_noise`).
"""

from __future__ import annotations

import polars as pl

# A double holds 15 to 17 significant decimal digits; the 16th and 17th are where sums leave their noise.
SIGNIFICANT_DIGITS = 15


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


def without_float_noise(frame: pl.DataFrame) -> pl.DataFrame:
    """Each float rounded to `SIGNIFICANT_DIGITS` significant digits: `61481.54999999999` → `61481.55`.

    Through the shortest decimal text of 15 digits, not Polars' `round_sig_figs`, which scales by a power
    of ten and leaves new noise in tiny values (1e-20/3).
    """
    floats = [name for name, dtype in frame.schema.items() if dtype in (pl.Float32, pl.Float64)]
    return frame.with_columns(
        pl.col(name).map_elements(_tidy, return_dtype=pl.Float64, skip_nulls=True) for name in floats
    )


def _tidy(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")

"""Text made harmless where it leaves: CSV formulas, terminal escapes, invisible and reordering characters."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from oabench_pipeline.catalogue.listing import decode_listing, listing_rows
from oabench_pipeline.core.markdown import markdown_cell
from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.core.tables import csv_ready
from oabench_pipeline.core.text_safety import (
    clean_label,
    clean_label_expr,
    spreadsheet_safe,
    spreadsheet_safe_expr,
    terminal_safe,
)

FORMULAS = ['=HYPERLINK("http://evil.example/x","click")', "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"]
HOSTILE_LABELS = {
    "Evil\x1b[31mRed\x1b[0m": "Evil [31mRed [0m",
    "fdp.\u202eexe": "fdp.exe",
    "Claude\u200b Opus": "Claude Opus",
    "\ufeffGLM\u2066 5\u2069": "GLM 5",
    "Model\x07\x9b One": "Model One",
    "plain label": "plain label",
}


@pytest.mark.parametrize("text", FORMULAS)
def test_a_formula_cell_gets_an_apostrophe_and_nothing_else_changes(text: str) -> None:
    assert spreadsheet_safe(text) == "'" + text
    assert pl.DataFrame({"c": [text]}).select(spreadsheet_safe_expr("c")).item() == "'" + text
    for harmless in ("GPT-5", "a=b", "0.5", "", "'=already"):
        assert spreadsheet_safe(harmless) == harmless


def test_every_csv_we_write_neutralises_formulas_in_text_columns_only() -> None:
    frame = pl.DataFrame({"label": FORMULAS, "score": [-1.5] * len(FORMULAS), "n": [-3] * len(FORMULAS)})
    ready = csv_ready(frame)
    assert ready["label"].to_list() == ["'" + f for f in FORMULAS]
    assert ready["score"].to_list() == [-1.5] * len(FORMULAS) and ready["n"].to_list() == [-3] * len(FORMULAS)


@pytest.mark.parametrize(("label", "clean"), HOSTILE_LABELS.items())
def test_labels_lose_control_bidi_and_zero_width_characters(label: str, clean: str) -> None:
    assert clean_label(label) == clean
    assert pl.DataFrame({"label": [label]}).select(clean_label_expr("label")).item() == clean


def test_terminal_output_shows_escapes_as_text() -> None:
    assert terminal_safe("Evil\x1b]0;pwned\x07 ok") == "Evil\\x1b]0;pwned\\x07 ok"
    assert "\x1b" not in terminal_safe("\x1b[2J\x9b")


def test_markdown_cells_escape_html() -> None:
    assert markdown_cell("<script>alert(1)</script> & |") == "&lt;script&gt;alert(1)&lt;/script&gt; &amp; \\|"


def test_catalogue_names_and_registry_labels_are_cleaned_where_they_enter() -> None:
    body = b'{"data": [{"id": "acme/m-1", "name": "Acme\\u001b[2J M1\\u202e\\u200b", "created": 1700000000}]}'
    [row], _ = listing_rows(decode_listing(body))
    assert row["name"] == "Acme [2J M1"
    model = ModelConfig.model_validate({"id": "acme/m-1", "label": "\u202e\x1b\u200b"})
    assert model.label == "acme/m-1"  # nothing left to show: the id instead
    assert ModelConfig.model_validate({"id": "acme/m-1", "label": "Acme\u200b M1"}).label == "Acme M1"


def test_max_cost_usd_must_be_finite() -> None:
    with pytest.raises(ValueError, match="finite"):
        ModelConfig.model_validate({"id": "acme/m-1", "max_cost_usd": float("inf")})


@pytest.mark.parametrize("name", ["models.toml", "watch.toml"])
def test_a_byte_order_mark_is_named_not_reported_as_invalid_statement(tmp_path: Path, name: str) -> None:
    """Windows editors save UTF-8 with a BOM; TOML refuses it as "Invalid statement (line 1, column 1)"."""
    from oabench_pipeline.core.models_registry import load_models_registry
    from oabench_pipeline.core.watch_policy import load_watch_policy

    body = '[[models]]\nid = "acme/m"\n' if name == "models.toml" else "[watch]\nenabled = false\n"
    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf" + body.encode())
    load = load_models_registry if name == "models.toml" else load_watch_policy
    with pytest.raises(ValueError, match=r":1: the file starts with a UTF-8 byte-order mark \(BOM\)"):
        load(path)

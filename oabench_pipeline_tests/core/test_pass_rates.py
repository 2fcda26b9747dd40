"""`core/pass_rates.py`: the packaged candidates' pass rates, and a bad registry refused with its place."""

from __future__ import annotations

from pathlib import Path

import pytest

from oabench_pipeline.core.pass_rates import PassRatesError, load_pass_rates, pass_rate_problems


def test_packaged_rates_agree_with_their_counts_and_name_their_source() -> None:
    table = load_pass_rates()
    assert pass_rate_problems(table) == []
    assert table["edition"].is_unique().all()
    assert table["source_url"].str.starts_with("http").all()
    ix = table.filter(table["edition"] == 9).row(0, named=True)
    assert (ix["pass_rate"], ix["approved"], ix["denominator"], ix["denominator_kind"]) == (
        0.1667,
        19134,
        114763,
        "present",
    )


def test_a_rate_off_its_counts_is_a_problem(tmp_path: Path) -> None:
    registry = tmp_path / "pass_rates.toml"
    registry.write_text(
        """
[[edition]]
edition = 9
pass_rate = 0.30
approved = 19134
denominator = 114763
denominator_kind = "present"
stage = "final"
source = { url = "https://example.org/ix", title = "IX" }
""",
        encoding="utf-8",
    )
    assert pass_rate_problems(load_pass_rates(registry)) == ["edition 9: rate 0.3 but 19134/114763 = 0.1667"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('denominator_kind = "everyone"\nstage = "final"\npass_rate = 0.5', "field 'denominator_kind'"),
        ('denominator_kind = "present"\nstage = "final"', "give 'pass_rate' or 'approved'"),
        ('denominator_kind = "present"\nstage = "someday"\npass_rate = 0.5', "field 'stage'"),
    ],
)
def test_a_bad_entry_is_refused_naming_it(tmp_path: Path, entry: str, message: str) -> None:
    registry = tmp_path / "pass_rates.toml"
    registry.write_text(
        f'[[edition]]\nedition = 9\n{entry}\nsource = {{ url = "https://example.org", title = "t" }}\n',
        encoding="utf-8",
    )
    with pytest.raises(PassRatesError, match=f"edition entry 1: {message}"):
        load_pass_rates(registry)

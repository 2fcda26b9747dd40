"""Suites in the editions registry: parsing, validation (one line naming the file and the suite), resolution."""

from __future__ import annotations

import datetime as dt
import tomllib
from dataclasses import replace
from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from oabench_pipeline.core.editions import (
    ALL_SUITE,
    DEFAULT_EDITIONS_FILE,
    DEFAULT_SUITE,
    EditionsRegistryError,
    Suite,
    default_suite,
    format_editions,
    load_editions,
    load_suites,
    parse_edition_spec,
    parse_suites,
    resolve_suite,
    suite_editions,
)
from oabench_pipeline.core.leaderboard import build_leaderboard_tables, suite_view
from oabench_pipeline.core.reports import ReportContext, leaderboard_markdown, suite_heading, write_reports
from oabench_pipeline_tests.core.synthetic_results import (
    SyntheticWarehouse,
    make_synthetic_warehouse,
    register,
)

KNOWN = [1, 2, 3, 4, 5, 37, 43, 44, 45]


def _suites(text: str) -> dict:
    return parse_suites(tomllib.loads(text), "reg.toml", KNOWN)


def test_packaged_registry_defines_the_study_suite_as_the_default() -> None:
    suites = load_suites()
    assert suite_editions(DEFAULT_SUITE, suites) == [43, 44, 45]
    assert default_suite(suites).name == DEFAULT_SUITE
    assert suite_editions(None, suites) == [43, 44, 45]
    # `all` is built in, last, and holds every registry edition.
    assert list(suites)[-1] == ALL_SUITE
    assert suite_editions(ALL_SUITE, suites) == [e.edition for e in load_editions()]


def test_ranges_lists_and_file_order() -> None:
    suites = _suites(
        """
[suites.fgv]
editions = "3-5,37"
description = "FGV"
[suites.recent]
editions = [45, 43, 44]
"""
    )
    assert list(suites) == ["fgv", "recent"]
    assert suites["fgv"].editions == (3, 4, 5, 37)
    assert suites["recent"].editions == (43, 44, 45)  # sorted
    assert suites["fgv"].label == "fgv (editions 3-5,37)"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[suites.x]\neditions = [43, 46, 47]", "reg.toml: suite 'x': edition(s) 46-47 not in the registry"),
        ("[suites.x]\neditions = []", "reg.toml: suite 'x': no editions (an empty suite ranks nothing)"),
        ('[suites.x]\ndescription = "no editions"', "reg.toml: suite 'x': no editions"),
        ("[suites.x]\neditions = [43, 43]", "reg.toml: suite 'x': edition(s) 43 listed twice"),
        ('[suites.x]\neditions = "43-40"', "reg.toml: suite 'x': editions '43-40': editions start at 1"),
        ('[suites.x]\neditions = "4x"', "reg.toml: suite 'x': editions '4x' is not an edition number"),
        ("[suites.x]\neditions = 43", "reg.toml: suite 'x': editions must be a list of edition numbers"),
        ("[suites.x]\neditions = [43]\nweight = 2", "reg.toml: suite 'x': unknown field(s) weight"),
        ("[suites.all]\neditions = [43]", "reg.toml: suite 'all' is built in"),
        ('[suites."Study 2026"]\neditions = [43]', "reg.toml: suite 'Study 2026': a name is 1-64 lowercase"),
        ("suites = [1]", "reg.toml: [suites] must be a table"),
        ("[suites]\nx = [43]", "reg.toml: suite 'x': must be a table"),
    ],
)
def test_bad_suites_are_one_line_naming_file_and_suite(text: str, problem: str) -> None:
    with pytest.raises(EditionsRegistryError) as caught:
        _suites(text)
    message = str(caught.value)
    assert message.startswith(problem), message
    assert "\n" not in message


def test_a_bad_suite_stops_every_reader_of_the_registry(tmp_path: Path) -> None:
    """A registry whose suite names an edition it lacks fails `load_editions` too (ingest, run, status...)."""
    path = tmp_path / "editions.toml"
    path.write_text(
        DEFAULT_EDITIONS_FILE.read_text(encoding="utf-8").replace(
            "editions = [43, 44, 45]", "editions = [42, 43]"
        ),
        encoding="utf-8",
    )
    for load in (load_editions, load_suites):
        with pytest.raises(
            EditionsRegistryError, match=rf"^{path}: suite 'oabench-2026': edition\(s\) 42 not"
        ):
            load(path)


def test_a_suite_named_twice_is_the_toml_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "editions.toml"
    twice = "\n[suites.oabench-2026]\neditions = [43]\n"
    path.write_text(DEFAULT_EDITIONS_FILE.read_text(encoding="utf-8") + twice, encoding="utf-8")
    with pytest.raises(EditionsRegistryError, match=rf"^{path}: .*line \d+"):
        load_suites(path)


def test_discovered_editions_join_all_and_a_registry_without_the_study_suite_defaults_to_all(
    tmp_path: Path,
) -> None:
    registry = DEFAULT_EDITIONS_FILE.read_text(encoding="utf-8")
    own = tmp_path / "editions.toml"
    start = registry.index("[suites.oabench-2026]")
    own.write_text(registry[:start] + registry[registry.index("[area_schemes]") :], encoding="utf-8")
    discovered = tmp_path / "discovered.toml"
    block = registry[registry.index("[[editions]]", registry.index("edition = 45") - 40) :]
    discovered.write_text(
        registry[registry.index("[area_schemes]") : registry.index("[[editions]]")]
        + block.replace("edition = 45", "edition = 46"),
        encoding="utf-8",
    )
    suites = load_suites(own, discovered)
    assert list(suites) == [ALL_SUITE]
    assert suite_editions(ALL_SUITE, suites) == [43, 44, 45, 46]
    assert default_suite(suites).name == ALL_SUITE
    assert resolve_suite(None, suites).name == ALL_SUITE


def test_unknown_suite_lists_the_known_ones(tmp_path: Path) -> None:
    path = tmp_path / "editions.toml"
    path.write_text(_registry_with("[suites.test-only]\neditions = [43]\n"), encoding="utf-8")
    suites = load_suites(path)
    assert list(suites)[-2:] == ["test-only", ALL_SUITE]  # file order, then the built-in
    with pytest.raises(
        EditionsRegistryError, match=rf"^unknown suite 'fgv'; the registry has: {', '.join(suites)}$"
    ):
        resolve_suite("fgv", suites)


def _registry_with(suites: str) -> str:
    """The packaged registry with `suites` (TOML) added to its own."""
    packaged = DEFAULT_EDITIONS_FILE.read_text(encoding="utf-8")
    start = packaged.index("[area_schemes]")
    return packaged[:start] + suites + "\n" + packaged[start:]


def test_edition_spec_round_trip() -> None:
    assert parse_edition_spec("1-3, 5,43-45,44") == [1, 2, 3, 5, 43, 44, 45]
    assert format_editions([45, 1, 2, 3, 5, 43, 44]) == "1-3,5,43-45"
    assert parse_edition_spec(format_editions(range(1, 26))) == list(range(1, 26))
    with pytest.raises(ValueError, match="names no edition"):
        parse_edition_spec(" , ")


# ---------------------------------------------------------------------------------------------------------
# Ranking in a suite (core/leaderboard.py)
# ---------------------------------------------------------------------------------------------------------

STUDY = Suite(name=DEFAULT_SUITE, editions=(43, 44, 45))
EVERY = Suite(name=ALL_SUITE, editions=(42, 43, 44, 45))
LATE = Suite(name="late", editions=(44, 45))


def _without(warehouse: SyntheticWarehouse, keep: pl.Expr, *tables: str) -> SyntheticWarehouse:
    """The warehouse with only the rows of `tables` where `keep` holds."""
    kept = {name: pl.from_arrow(warehouse.tables[name]).filter(keep).to_arrow() for name in tables}
    return replace(warehouse, tables={**warehouse.tables, **kept})


@pytest.fixture(scope="module")
def one_key_skipped_42() -> tuple[SyntheticWarehouse, str, dict[str, pl.DataFrame]]:
    """Four keys on editions 42-45, all complete, except that one never ran edition 42."""
    warehouse = make_synthetic_warehouse(
        n_models=4, n_editions=4, first_edition=42, seed=2, plant_anomalies=False
    )
    skipper = warehouse.model_keys[1]
    warehouse = _without(
        warehouse, ~((pl.col("model_key") == skipper) & (pl.col("edition") == 42)), "inferences"
    )
    tables = build_leaderboard_tables(register(duckdb.connect(), warehouse), suites=[STUDY, LATE, EVERY])
    return warehouse, skipper, tables


def _suite_rows(tables: dict[str, pl.DataFrame], table: str, suite: str) -> pl.DataFrame:
    return tables[f"{table}_by_suite"].filter(pl.col("suite") == suite).drop("suite")


def test_complete_on_the_study_editions_ranks_there_and_not_in_all(
    one_key_skipped_42: tuple[SyntheticWarehouse, str, dict[str, pl.DataFrame]],
) -> None:
    _, skipper, tables = one_key_skipped_42
    study, every = (_suite_rows(tables, "leaderboard", s) for s in (DEFAULT_SUITE, ALL_SUITE))
    row = {
        s: b.filter(pl.col("model_key") == skipper).row(0, named=True)
        for s, b in (("study", study), ("all", every))
    }
    assert row["study"]["complete"] and row["study"]["rank"] is not None
    assert (row["study"]["official_total"], row["study"]["editions_total"]) == (240, 3)
    assert not row["all"]["complete"] and row["all"]["rank"] is None
    assert (row["all"]["official_total"], row["all"]["editions_total"]) == (240, 4)  # what it ran, of 4
    assert study["rank"].null_count() == 0 and every["rank"].null_count() == 1
    assert set(every.filter(pl.col("rank").is_not_null())["official_total"]) == {320}
    # The plain tables are the default suite's rows; the tests and summaries follow each suite's ranked keys.
    assert_frame_equal(tables["leaderboard"], study)
    for table in ("pairwise_comparison", "provider_summary", "edition_deltas", "run_variance"):
        assert_frame_equal(tables[table], _suite_rows(tables, table, DEFAULT_SUITE), check_exact=True)
    pairs = {s: _suite_rows(tables, "pairwise_comparison", s).height for s in (DEFAULT_SUITE, ALL_SUITE)}
    assert pairs == {DEFAULT_SUITE: 6, ALL_SUITE: 3}  # 4 ranked keys, then 3
    assert skipper not in _suite_rows(tables, "edition_deltas", ALL_SUITE)["model_key"].to_list()
    assert tables["suites"].select(
        "suite", "is_default", "editions_ingested", "questions", "model_keys", "ranked_keys"
    ).rows() == [
        (DEFAULT_SUITE, True, [43, 44, 45], 240, 4, 4),
        ("late", False, [44, 45], 160, 4, 4),
        (ALL_SUITE, False, [42, 43, 44, 45], 320, 4, 3),
    ]


def test_areas_per_suite_and_over_every_edition(
    one_key_skipped_42: tuple[SyntheticWarehouse, str, dict[str, pl.DataFrame]],
) -> None:
    warehouse, skipper, tables = one_key_skipped_42
    questions = pl.from_arrow(warehouse.tables["questions"])
    active = questions.filter(pl.col("status") == "active")
    totals = {
        s: _suite_rows(tables, "leaderboard_by_area", s).group_by("model_key").agg(pl.col("total").sum())
        for s in (DEFAULT_SUITE, "late")
    }
    for suite, editions in ((DEFAULT_SUITE, [43, 44, 45]), ("late", [44, 45])):
        expected = active.filter(pl.col("edition").is_in(editions)).height
        assert set(totals[suite]["total"]) == {expected}, suite
    # The plain by-area table spans every edition a key ran: the skipper answered 42 nowhere.
    plain = tables["leaderboard_by_area"].group_by("model_key").agg(pl.col("total").sum())
    by_key = dict(plain.rows())
    assert by_key[skipper] == active.filter(pl.col("edition") != 42).height
    assert {v for k, v in by_key.items() if k != skipper} == {active.height}


ABILITY = ("ability", "ability_ci_low", "ability_ci_high", "ability_rank")


def test_an_edition_outside_the_default_suite_moves_none_of_its_tables() -> None:
    """Adding edition 42 (and runs on it) to a warehouse leaves every default-suite table as it was, but
    the Rasch abilities: one fit over every edition puts every key on one scale (`item_abilities`), so more
    answers move it; the ranking by accuracy, the scores and the tests do not move."""
    full = make_synthetic_warehouse(n_models=5, n_editions=4, first_edition=42, seed=4)
    study_only = pl.col("edition") != 42
    before = _without(full, study_only, "inferences", "questions", "answer_keys", "editions")
    old = build_leaderboard_tables(register(duckdb.connect(), before))  # no suites: `all` = 43-45
    new = build_leaderboard_tables(register(duckdb.connect(), full), suites=[STUDY, EVERY])
    assert_frame_equal(old["leaderboard"].drop(ABILITY), new["leaderboard"].drop(ABILITY), check_exact=True)
    one_scale = new["leaderboard"].join(new["item_abilities"], on="model_key", suffix="_fit")
    assert (one_scale["ability"] == one_scale["ability_fit"]).all()
    for table in (
        "pairwise_comparison",
        "provider_summary",
        "edition_deltas",
        "pareto_frontier",
        "latency_accuracy_correlation",
        "run_variance",
    ):
        assert_frame_equal(old[table], new[table], check_exact=True)
    assert new["leaderboard_by_edition"]["edition"].unique().sort().to_list() == [42, 43, 44, 45]


def test_the_report_names_the_suite_it_ranks_and_shows_its_editions(
    one_key_skipped_42: tuple[SyntheticWarehouse, str, dict[str, pl.DataFrame]], tmp_path: Path
) -> None:
    """What `write_reports` renders for a suite (the charts are drawn by the asset's test,
    scoring/test_analysis_assets.py): the heading, the suite's rows, its editions."""
    _, skipper, tables = one_key_skipped_42
    study, every = (
        tables["suites"].filter(pl.col("suite") == s).row(0, named=True) for s in (DEFAULT_SUITE, ALL_SUITE)
    )
    assert study["is_default"] and suite_heading(study) == "Suite oabench-2026: editions 43-45, 240 questions"
    missing = {**study, "editions": [41, 42, 43, 44, 45]}  # as when the registry has editions not ingested
    assert suite_heading(missing) == "Suite oabench-2026: editions 43-45, 240 questions (not ingested: 41-42)"
    context = ReportContext(dt.datetime(2026, 3, 3, tzinfo=dt.UTC), None, suite_heading(every))
    text = leaderboard_markdown(suite_view(tables, ALL_SUITE, every["editions"]), context)
    assert text.splitlines()[0].endswith(" · Suite all: editions 42-45, 320 questions")
    row = next(line for line in text.splitlines() if f"| {skipper} |" in line)
    assert row.startswith("| – (incomplete) |") and "run (43, 44, 45) of 4" in row
    assert "| Edition 42 | Edition 43 |" in text  # the suite's editions, per edition
    with pytest.raises(ValueError, match="suite 'nope' is not in the suites table"):
        write_reports(tables, tmp_path / "nope", suite="nope")

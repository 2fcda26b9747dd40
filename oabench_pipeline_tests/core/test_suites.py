"""Suites in the editions registry: parsing, validation (one line naming the file and the suite), resolution."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from oabench_pipeline.core.editions import (
    ALL_SUITE,
    DEFAULT_EDITIONS_FILE,
    DEFAULT_SUITE,
    EditionsRegistryError,
    default_suite,
    format_editions,
    load_editions,
    load_suites,
    parse_edition_spec,
    parse_suites,
    resolve_suite,
    suite_editions,
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


def test_unknown_suite_lists_the_known_ones() -> None:
    with pytest.raises(
        EditionsRegistryError, match=r"^unknown suite 'fgv'; the registry has: oabench-2026, all$"
    ):
        resolve_suite("fgv", load_suites())


def test_edition_spec_round_trip() -> None:
    assert parse_edition_spec("1-3, 5,43-45,44") == [1, 2, 3, 5, 43, 44, 45]
    assert format_editions([45, 1, 2, 3, 5, 43, 44]) == "1-3,5,43-45"
    assert parse_edition_spec(format_editions(range(1, 26))) == list(range(1, 26))
    with pytest.raises(ValueError, match="names no edition"):
        parse_edition_spec(" , ")

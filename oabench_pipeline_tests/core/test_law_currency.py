"""The legal-reforms registry, each question's law-currency flag, the notes that override it, and the key
audit listing a contested key under later law first (docs/law_currency.md)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from oabench_pipeline.core.analysis.item_response import fit_rasch
from oabench_pipeline.core.analysis.key_audit import key_audit
from oabench_pipeline.core.analysis.law_currency_effect import contested_questions, law_currency_effect
from oabench_pipeline.core.editions import DEFAULT_EDITIONS_FILE, load_editions
from oabench_pipeline.core.law_currency import (
    DEFAULT_REFORMS_FILE,
    LawCurrency,
    LawCurrencyError,
    flag_counts,
    legal_reforms_table,
    load_law_currency,
    parse_notes,
    parse_reforms,
    question_law_currency,
    registry_areas,
)
from oabench_pipeline.core.leaderboard import _audit_with_law_currency
from oabench_pipeline_tests.core.irt_simulation import law_flags, simulate

NEW_CPC_IN_FORCE = dt.date(2016, 3, 18)


def _registry_questions() -> tuple[pl.DataFrame, pl.DataFrame]:
    """Every question of every edition the registry pins (whichever they are), with its area, and the
    editions' exam dates: what `questions` and `editions` hold once they are ingested."""
    editions = load_editions()
    questions = pl.DataFrame(
        [
            (f"oab-{e.edition}-1f-q{n}", e.edition, n, e.area_of(n))
            for e in editions
            for n in range(1, e.question_count + 1)
        ],
        schema={"qid": pl.String, "edition": pl.Int32, "number": pl.Int32, "area": pl.String},
        orient="row",
    )
    dates = pl.DataFrame(
        [(e.edition, e.exam_date) for e in editions],
        schema={"edition": pl.Int32, "exam_date": pl.Date},
        orient="row",
    )
    return questions, dates


def test_every_civil_procedure_question_before_the_new_cpc_is_flagged_under_it_and_no_later_one() -> None:
    questions, dates = _registry_questions()
    currency = question_law_currency(questions, dates, load_law_currency())
    assert currency.height == questions.height and currency["qid"].n_unique() == questions.height
    under_cpc = currency["reforms_after"].list.contains("cpc-2015")
    civil_procedure_before = (pl.col("area") == "Processo Civil") & (pl.col("exam_date") < NEW_CPC_IN_FORCE)
    expected = currency.select(civil_procedure_before).to_series()
    assert expected.sum() > 0
    assert (under_cpc == expected).all()
    assert currency.filter(civil_procedure_before)["possibly_superseded"].all()  # no note says otherwise
    # Every flag is a reform of the question's area in force after its exam, and only those.
    reforms = {r.id: r for r in load_law_currency().reforms}
    for row in currency.iter_rows(named=True):
        wanted = [r.id for r in reforms.values() if row["area"] in r.areas and r.in_force > row["exam_date"]]
        assert row["reforms_after"] == wanted, row["qid"]
        assert row["possibly_superseded"] == bool(wanted)


def test_the_packaged_reforms_are_the_nine_checked_with_their_official_sources() -> None:
    law = load_law_currency()
    by_id = {r.id: r for r in law.reforms}
    assert set(by_id) == {
        "cpc-2015",
        "disability-statute-2015",
        "labour-reform-2017",
        "pension-reform-2019",
        "anticrime-2019",
        "procurement-2021",
        "improbity-2021",
        "lawyers-statute-2022",
        "tax-reform-2023",
    }
    assert (
        by_id["cpc-2015"].published == dt.date(2015, 3, 17) and by_id["cpc-2015"].in_force == NEW_CPC_IN_FORCE
    )
    assert "13.105" in by_id["cpc-2015"].act and "13.146" in by_id["disability-statute-2015"].act
    assert by_id["disability-statute-2015"].in_force == dt.date(2016, 1, 3)  # 180 days, LC 95 art. 8 §1
    assert by_id["labour-reform-2017"].in_force == dt.date(2017, 11, 11)  # 120 days
    assert by_id["anticrime-2019"].in_force == dt.date(2020, 1, 23)  # 30 days
    assert by_id["tax-reform-2023"].in_force == dt.date(2023, 12, 21)  # publication; phases in the rule
    assert all(r.source.startswith("https://www.planalto.gov.br/ccivil_03/") for r in law.reforms)
    assert [r.in_force for r in law.reforms] == sorted(r.in_force for r in law.reforms)
    assert law.notes == ()  # no question has been read against later law yet
    table = legal_reforms_table(law, question_law_currency(*_registry_questions(), law))
    assert table["in_force"].dtype == pl.Date and table.height == 9
    assert table.filter(pl.col("reform") == "cpc-2015")["questions_flagged"][0] > 0


def _notes_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "law_currency_notes.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_note_overrides_the_area_flag_both_ways(tmp_path: Path) -> None:
    questions, dates = _registry_questions()
    law = load_law_currency()
    flagged_qid = "oab-10-1f-q55"  # Processo Civil of 2013: under the new CPC
    current_qid = "oab-44-1f-q45"
    plain = question_law_currency(questions, dates, law).filter(
        pl.col("qid").is_in([flagged_qid, current_qid])
    )
    assert plain.sort("qid")["possibly_superseded"].to_list() == [True, False]
    path = _notes_file(
        tmp_path,
        f'''[[notes]]
qid = "{flagged_qid}"
verdict = "holds"
reforms = ["cpc-2015"]
note = "The rule asked about was kept by the 2015 CPC."
source = "https://example.org/commentary"

[[notes]]
qid = "{current_qid}"
verdict = "outdated"
note = "Changed by a later act."
source = "https://example.org/act"
''',
    )
    noted = LawCurrency(law.reforms, parse_notes(path, {r.id for r in law.reforms}))
    currency = question_law_currency(questions, dates, noted)
    rows = {
        r["qid"]: r
        for r in currency.filter(pl.col("qid").is_in([flagged_qid, current_qid])).iter_rows(named=True)
    }
    assert rows[flagged_qid]["possibly_superseded"] is False and rows[flagged_qid]["area_flag"] is True
    assert rows[flagged_qid]["reforms_after"] == ["cpc-2015"] and rows[flagged_qid]["note_verdict"] == "holds"
    assert rows[current_qid]["possibly_superseded"] is True and rows[current_qid]["area_flag"] is False
    assert rows[current_qid]["note_source"] == "https://example.org/act"
    counts = dict(flag_counts(currency, legal_reforms_table(noted, currency), [10, 44]).iter_rows())
    assert counts["current law"] + counts["possibly superseded"] == 160
    assert counts["a note says it holds"] == 1 and counts["a note says it outdated"] == 1


@pytest.mark.parametrize(
    ("entry", "field", "problem"),
    [
        (
            'areas = ["Direito Espacial"]',
            "areas",
            "'Direito Espacial' is not an area of the editions registry",
        ),
        ("in_force = 2014-01-01", "in_force", "in_force 2014-01-01 is before published 2015-03-17"),
        ('source = "https://example.org/l13105.htm"', "source", "String should match pattern"),
    ],
)
def test_a_bad_reform_is_one_line_naming_file_line_and_field(
    tmp_path: Path, entry: str, field: str, problem: str
) -> None:
    lines = DEFAULT_REFORMS_FILE.read_text(encoding="utf-8").splitlines()
    key = entry.split(" =")[0]
    first = next(i for i, line in enumerate(lines) if line.startswith(f"{key} ="))  # in the first reform
    lines[first] = entry
    path = tmp_path / "legal_reforms.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(LawCurrencyError) as raised:
        parse_reforms(path, registry_areas(DEFAULT_EDITIONS_FILE))
    assert str(raised.value).startswith(f"{path}:{first + 1}: field '{field}': ")
    assert problem in str(raised.value) and "\n" not in str(raised.value)


def test_a_bad_note_is_one_line_naming_file_line_and_field(tmp_path: Path) -> None:
    ids = {r.id for r in load_law_currency().reforms}
    good = 'qid = "oab-3-1f-q20"\nverdict = "holds"\nnote = "n"\nsource = "s"\n'
    cases = [
        ('[[notes]]\nqid = "oab-3-1f-q20"\nverdict = "stale"\nnote = "n"\nsource = "s"\n', 3, "verdict"),
        (
            '[[notes]]\nqid = "oab-3-1f-q20"\nverdict = "holds"\nreforms = ["cpc-2016"]\nnote = "n"\nsource = "s"\n',
            4,
            "reforms",
        ),
        (f"[[notes]]\n{good}\n[[notes]]\n{good}", 8, "qid"),
        ('[[notes]]\nqid = "3-20"\nverdict = "holds"\nnote = "n"\nsource = "s"\n', 2, "qid"),
    ]
    for text, line, field in cases:
        path = _notes_file(tmp_path, text)
        with pytest.raises(LawCurrencyError, match=rf"^{path}:{line}: field '{field}': "):
            parse_notes(path, ids)


def test_a_contested_key_under_later_law_is_listed_first_in_the_key_audit() -> None:
    """Wrong keys planted in a simulated benchmark, one of them on a flagged question: the audit flags
    them all, the one under later law heads it, and `law_currency_effect` counts it for the keys that
    chose the consensus letter."""
    flagged = law_flags(3, 80, share=0.34)  # the first edition's reformed areas
    sim = simulate(
        7,
        n_keys=11,
        n_editions=3,
        ability_mean=2.0,
        ability_sd=0.8,
        wrong_keys=6,
        wrong_key_max_difficulty=0.5,
        flagged=flagged,
    )
    fit = fit_rasch(sim.correct, sim.covered, sim.group)
    questions = pl.DataFrame(
        {
            "qid": [f"q{j:03d}" for j in range(sim.group.size)],
            "edition": (sim.group + 1).astype(np.int32),
            "number": np.tile(np.arange(1, 81), 3).astype(np.int32),
            "correct": [["A", "B", "C", "D"][k] for k in sim.key_letter],
            "status": ["active"] * sim.group.size,
            "key_status": ["definitive"] * sim.group.size,
        }
    )
    audit = key_audit(questions, sim.letters, fit.ability, fit.difficulty)
    suspicious = set(audit.filter(pl.col("suspicious"))["qid"].to_list())
    planted = {f"q{j:03d}" for j in sim.wrong_keys}
    under_law = sorted(q for q in planted if flagged[int(q[1:])])
    assert planted <= suspicious and under_law, (planted, suspicious)
    currency = questions.select(
        "qid",
        possibly_superseded=pl.Series(flagged),
        reforms_after=pl.Series([["cpc-2015"] if f else [] for f in flagged], dtype=pl.List(pl.String)),
    )
    ordered = _audit_with_law_currency(audit, currency)
    head = ordered.head(len(under_law))
    assert sorted(head["qid"].to_list()) == under_law and head["possibly_superseded"].all()
    assert ordered["suspicious"][len(under_law)] and not ordered["possibly_superseded"][len(under_law)]
    table = law_currency_effect(
        pl.Series([f"k{i}" for i in range(11)]),
        fit,
        {"E": sim.covered, "C": sim.correct, "L": sim.letters},
        flagged,
        contested_questions(audit, questions),
    )
    pooled = table.filter(pl.col("pooled"))
    assert pooled["contested_superseded"][0] == len(under_law)
    assert table.filter(~pl.col("pooled"))["contested_superseded"].max() == len(under_law)


def test_the_current_law_score_credits_annulled_questions_and_leaves_out_unknown_keys() -> None:
    """Five questions of a suite: two flagged (left out), one annulled (credited to every key), one whose
    key is unknown (`unresolved`: in neither score), two active ones; the key with both right ranks first."""
    from oabench_pipeline.core.analysis.law_currency_effect import current_law_leaderboard

    questions = pl.DataFrame(
        {
            "qid": [f"q{i}" for i in range(6)],
            "status": ["active", "active", "annulled", "unresolved", "active", "active"],
        }
    )
    superseded = np.array([True, True, False, False, False, False])
    correct = np.array([[True, True, False, False, True, True], [False, False, False, False, True, False]])
    covered = np.array([[True, True, False, False, True, True], [True, True, False, False, True, True]])
    keys_df = pl.DataFrame(
        {"model_key": ["a", "b"], "complete": [True, True], "rank": [1, 2], "official_accuracy": [0.8, 0.5]}
    )
    board = current_law_leaderboard(
        "s",
        keys_df,
        pl.Series(["a", "b"]),
        {"C": correct, "E": covered},
        questions,
        np.ones(6, bool),
        superseded,
    )
    rows = {r["model_key"]: r for r in board.iter_rows(named=True)}
    assert rows["a"]["official_total"] == rows["b"]["official_total"] == 3  # 2 active + 1 annulled
    assert (rows["a"]["official_score"], rows["b"]["official_score"]) == (3, 2)
    assert (rows["a"]["technical_total"], rows["a"]["technical_score"]) == (2, 2)
    assert (rows["a"]["rank"], rows["b"]["rank"]) == (1, 2) and rows["b"]["rank_all_questions"] == 2
    assert rows["a"]["official_ci_low"] <= rows["a"]["official_accuracy"] <= rows["a"]["official_ci_high"]

"""`oabench import` checks every run folder before importing any: all or nothing, one line per problem."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from oabench_pipeline.core.published_runs import PublishedRunError, validate_published_runs
from oabench_pipeline_tests.pipeline_env import PipelineEnv

INGESTED = ("43", "44", "45")
PARTIAL_RUN = "2026-03-03T13-41-07-320Z_openai--gpt-5-mini_direto"  # no summary.json: still valid


@pytest.fixture
def runs(tmp_path: Path, shared_oab: Path) -> Path:
    target = tmp_path / "runs"
    shutil.copytree(shared_oab / "published-runs", target)
    return target


def edit_line(path: Path, number: int, **changes: object) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[number - 1])
    record.update(changes)
    lines[number - 1] = json.dumps(record, ensure_ascii=False)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_published_runs_as_shipped_are_valid(runs: Path) -> None:
    assert not (runs / PARTIAL_RUN / "summary.json").exists()
    validate_published_runs(runs, INGESTED)


def test_hostile_model_id_in_config_is_refused(runs: Path) -> None:
    config = runs / PARTIAL_RUN / "config.json"
    data = json.loads(config.read_text(encoding="utf-8"))
    config.write_text(json.dumps({**data, "model": "evil|x"}), encoding="utf-8")
    with pytest.raises(PublishedRunError, match=rf"{config}: field 'model': 'evil\|x' contains '\|'"):
        validate_published_runs(runs, INGESTED)


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"qid": "../../../etc/passwd"}, "qid", "is not 'oab-45-1f-q"),
        ({"qid": "oab-45-1f-q99", "questionNumber": 99}, "qid", "1..80"),
        (
            {"qid": "oab-46-1f-q3", "edition": 46, "questionNumber": 3},
            "edition",
            "edition 46 is not ingested",
        ),
        ({"model": "a/../b"}, "model", "'..' segment"),
    ],
)
def test_bad_line_is_refused_with_file_line_and_field(
    runs: Path, changes: dict, field: str, words: str
) -> None:
    lines = runs / PARTIAL_RUN / "inferences.jsonl"
    edit_line(lines, 3, **changes)
    with pytest.raises(PublishedRunError) as raised:
        validate_published_runs(runs, INGESTED)
    message = str(raised.value)
    assert f"{lines}:3: field '{field}':" in message and words in message
    assert "\n" not in message


def test_import_with_one_bad_folder_imports_nothing(fresh_env: PipelineEnv, runs: Path) -> None:
    edit_line(runs / PARTIAL_RUN / "inferences.jsonl", 5, qid="../../../etc/passwd")
    result = fresh_env.cli("import", str(runs))
    assert result.exit_code == 1, result.output
    assert f"{runs / PARTIAL_RUN / 'inferences.jsonl'}:5: field 'qid'" in result.output
    assert "Traceback" not in result.output
    assert not fresh_env.warehouse.has_table("inferences"), "the four good folders are not imported either"

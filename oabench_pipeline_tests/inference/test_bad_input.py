"""Bad input through the real `oabench run`: broken registries, a hostile model id, hostile replies."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from oabench_pipeline.shared.partitions import cell_partition_key
from oabench_pipeline_tests.inference.replay import question_texts
from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file
from oabench_pipeline_tests.servers.openai_replay import (
    FaultProfile,
    RecordedReply,
    ReplayServer,
    prompt_key,
)

EDITION = "45"


def all_files(root: Path) -> dict[str, int]:
    """Every file under `root` with its size: enough to see that a failed command wrote nothing."""
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def use_registry_text(env: PipelineEnv, text: str) -> Path:
    path = env.root / "models.toml"
    path.write_text(text, encoding="utf-8")
    env.set("OABENCH_MODELS_FILE", path)
    return path


def local_model(model_id: str, base_url: str, **extra: object) -> dict:
    """A keyless OpenAI-compatible endpoint (like a local vLLM)."""
    return {"id": model_id, "base_url": base_url, "api_key_env": "", **extra}


# ------------------------------------------------------------------------------------ broken registries

BROKEN_REGISTRIES = {
    "syntax error": (
        '[[models]]\nid = "acme/a"\nconcurrency = 4\n\n[[models]]\nid = "acme/b\nlabel = "B"\n',
        6,
        "id",
        "TOML syntax error",
    ),
    "duplicate TOML key": (
        '[[models]]\nid = "acme/a"\nlabel = "A"\nlabel = "A again"\n',
        4,
        "label",
        "TOML syntax error",
    ),
    "duplicate model key": (
        '[[models]]\nid = "acme/a"\n\n[[models]]\nid = "acme/b"\nkey = "acme/a"\n',
        6,
        "key",
        "duplicate key 'acme/a'",
    ),
    "unknown field": (
        '[[models]]\nid = "acme/a"\nlabel = "A"\nmax_cost = 5.0\n',
        4,
        "max_cost",
        "Extra inputs are not permitted",
    ),
    "wrong type": (
        '[[models]]\nid = "acme/a"\n\n[[models]]\nid = "acme/b"\nconcurrency = "8"\n',
        6,
        "concurrency",
        "valid integer",
    ),
    # Model ids and keys name files and partitions: a safe alphabet, no `..`, at most 200 characters.
    "key outside responses/": ('[[models]]\nid = "acme/a"\nkey = ".."\n', 3, "key", "'..' segment"),
    "key of 300 characters": (
        f'[[models]]\nid = "acme/a"\nkey = "{"k" * 300}"\n',
        3,
        "key",
        "is 300 characters long; at most 200",
    ),
    "control character in key": (
        '[[models]]\nid = "acme/a"\nkey = "acme/a\\u0007"\n',
        3,
        "key",
        "only letters, digits and / : . _ - are allowed",
    ),
    "hostile id": (
        '[[models]]\nid = "acme/a"\n\n[[models]]\nid = "evil\'; drop table x; --|módulo"\n',
        5,
        "id",
        "only letters, digits and / : . _ - are allowed",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN_REGISTRIES))
def test_broken_registry_fails_naming_file_line_and_field(fresh_env: PipelineEnv, case: str) -> None:
    text, line, field, problem = BROKEN_REGISTRIES[case]
    path = use_registry_text(fresh_env, text)
    fresh_env.warehouse.ensure_views()  # the healthy catalogue any earlier command leaves
    before = all_files(fresh_env.root)
    result = fresh_env.cli("run", "--editions", EDITION)
    assert result.exit_code == 1, result.output
    assert f"{path}:{line}:" in result.output
    assert f"field '{field}'" in result.output
    assert problem in result.output
    assert "Traceback" not in result.output
    assert all_files(fresh_env.root) == before, "a rejected registry must not write anything"


# ---------------------------------------------------------------------------------- hostile replies

HUGE = "B" * (10 * 1024 * 1024)
NOT_UTF8 = b'{"choices": [{"message": {"role": "assistant", "content": "\xff\xfe resposta \xe9"}}]}'
HTML = b"<!DOCTYPE html><html><head><title>Login</title></head><body>Wi-Fi login</body></html>"


def hostile_replies(env: PipelineEnv, model: str) -> dict[tuple[str, str], RecordedReply]:
    """q1: a 10 MB answer; q2: a body that is not UTF-8; q3: a 200 HTML page; the rest: fallback."""
    texts = question_texts(env.warehouse)
    return {
        (model, texts["oab-45-1f-q1"]): RecordedReply(HUGE, completion_tokens=10_000_000, cost=0.5),
        (model, texts["oab-45-1f-q2"]): RecordedReply("", raw_body=NOT_UTF8),
        (model, texts["oab-45-1f-q3"]): RecordedReply("", raw_body=HTML, content_type="text/html"),
    }


@pytest.mark.slow
def test_huge_non_utf8_and_html_replies_end_as_error_rows(fresh_env: PipelineEnv) -> None:
    bad, portal = "acme/bad-replies", "acme/captive-portal"
    with (
        ReplayServer(replies=hostile_replies(fresh_env, bad)) as server,
        ReplayServer(faults=FaultProfile(rate_html=1.0)) as html_everywhere,
    ):
        entries = [local_model(bad, server.base_url), local_model(portal, html_everywhere.base_url)]
        fresh_env.set("OABENCH_MODELS_FILE", write_models_file(fresh_env.root / "models.toml", entries))
        result = fresh_env.cli("run", "--models", f"{bad},{portal}", "--editions", EDITION)
        # Error rows are reported, not fatal: the run completes and the leaderboard is rebuilt; the exit
        # code says the cells are not complete, and the summary names each with its errors.
        assert result.exit_code == 1, result.output
        assert "leaderboard rebuilt" in result.output
        assert (
            f"2 of 2 cell(s) not complete (rerun `oabench run --models {bad},{portal} --editions {EDITION}`"
            in (result.output)
        )
        assert f"{bad} × {EDITION}: 3 error row(s)" in result.output
        assert f"{portal} × {EDITION}: 80 error row(s) (most often: gave up after" in result.output
        per_prompt = server.stats.requests_per_prompt
        texts = question_texts(fresh_env.warehouse)

    rows = fresh_env.warehouse.read("inferences", str(cell_partition_key(bad, EDITION)))
    errors = dict(rows.filter(pl.col("error").is_not_null()).select("qid", "error").iter_rows())
    assert set(errors) == {"oab-45-1f-q1", "oab-45-1f-q2", "oab-45-1f-q3"}
    assert "exceeded" in errors["oab-45-1f-q1"] and "not stored" in errors["oab-45-1f-q1"]
    assert "not valid UTF-8" in errors["oab-45-1f-q2"]
    assert "not JSON" in errors["oab-45-1f-q3"] and "DOCTYPE" in errors["oab-45-1f-q3"]
    failed = rows.filter(pl.col("error").is_not_null())
    assert failed["raw_response"].null_count() == 3 and failed["answer_lenient"].null_count() == 3
    assert rows.filter(pl.col("error").is_null())["raw_response"].to_list() == ["A"] * 77
    # The runaway answer was paid once and not asked again; malformed bodies got their small retry budget.
    assert per_prompt[prompt_key(bad, texts["oab-45-1f-q1"])] == 1
    assert per_prompt[prompt_key(bad, texts["oab-45-1f-q2"])] == 3
    # The log never holds the 10 MB body.
    log = fresh_env.settings.warehouse_path.parent / "responses"
    assert max(p.stat().st_size for p in log.rglob("*.jsonl")) < 1_000_000

    portal_rows = fresh_env.warehouse.read("inferences", str(cell_partition_key(portal, EDITION)))
    assert portal_rows.height == 80 and portal_rows["error"].null_count() == 0
    assert portal_rows["raw_response"].null_count() == 80
    scores = fresh_env.warehouse.query(
        "select model_key, count(*) as n from scores group by model_key order by model_key"
    )
    assert scores.rows() == [(bad, 80), (portal, 80)]

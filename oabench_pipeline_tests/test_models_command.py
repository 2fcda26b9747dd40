"""`oabench models add`: a model written to the user's own registry file, read beside the packaged ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from oabench_pipeline.cli import main
from oabench_pipeline.core.models_registry import known_models
from oabench_pipeline.settings import Settings


def oabench(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def user_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A working directory with no models file yet, the packaged registry as a user has it."""
    for name in ("OABENCH_MODELS_FILE", "OABENCH_PACKAGED_MODELS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_models_add_writes_the_user_s_file_which_adds_to_the_packaged_registry(
    user_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    added = oabench("models", "add", "qwen3:8b", "--base-url", "http://[::1]:11434/v1", "--api-key-env", "")
    assert added.exit_code == 0, added.output
    mine = user_dir / "models.toml"
    assert added.output.splitlines() == [
        f"added qwen3:8b to {mine}",
        f"export OABENCH_MODELS_FILE={mine} so that oabench reads it (added to the packaged models)",
        "`oabench run --models qwen3:8b --dry-run` shows its calls and their cost",
    ]
    assert (
        mine.read_text()
        == '[[models]]\nid = "qwen3:8b"\nbase_url = "http://[::1]:11434/v1"\napi_key_env = ""\n'
    )

    monkeypatch.setenv("OABENCH_MODELS_FILE", "models.toml")
    again = oabench("models", "add", "deepseek/deepseek-v3.2", "--base-url", "http://127.0.0.1:8000/v1")
    assert again.exit_code == 0, again.output
    assert again.output.splitlines()[0] == (
        f"added deepseek/deepseek-v3.2 to {mine} (it replaces the packaged entry of that key)"
    )
    settings = Settings.from_env()
    models = {m.key: m for m in known_models(settings.models_files)}
    assert models["qwen3:8b"].base_url == "http://[::1]:11434/v1" and models["qwen3:8b"].api_key_env is None
    assert models["deepseek/deepseek-v3.2"].base_url == "http://127.0.0.1:8000/v1"
    # The packaged entry's label and provider stay with the model it replaces.
    assert (models["deepseek/deepseek-v3.2"].label, models["deepseek/deepseek-v3.2"].provider) == (
        "DeepSeek V3.2",
        "DeepSeek",
    )
    assert "baseline/random" in models  # the packaged ones are still there


def test_models_add_refuses_in_one_line_and_writes_nothing(
    user_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = user_dir / "models.toml"
    assert oabench("models", "add", "acme/m").exit_code == 0
    before = mine.read_text()
    monkeypatch.setenv("OABENCH_MODELS_FILE", str(mine))
    for args, message in (
        (("acme/m",), f"Error: acme/m is already in {mine}: edit its entry there"),
        (
            ("bad id",),
            "Error: MODEL_ID: 'bad id' contains ' ': only letters, digits and / : . _ - are allowed",
        ),
        (("x/y", "--base-url", "ftp://host/v1"), "Error: --base-url: "),
    ):
        result = oabench("models", "add", *args)
        assert result.exit_code == 1, result.output
        assert len(result.output.splitlines()) == 1 and result.output.startswith(message), result.output
    assert mine.read_text() == before

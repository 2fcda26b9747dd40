"""`oabench models add`: a model added to the user's own registry file, which `OABENCH_MODELS_FILE` names.

That file's models are added to the packaged ones (`Settings.models_files`); this writes the `[[models]]`
block `oabench run --models UNKNOWN` suggests, validated whole before the file is replaced.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
import tomli_w

from oabench_pipeline.cli.group import main
from oabench_pipeline.settings import DEFAULT_MODELS_FILE, Settings

if TYPE_CHECKING:
    from oabench_pipeline.core.models_registry import ModelConfig

USER_MODELS_FILE = Path("models.toml")  # where a first model goes when OABENCH_MODELS_FILE is unset


@main.group(name="models")
def models() -> None:
    """The models registry: add a model to your own file (OABENCH_MODELS_FILE), beside the packaged ones."""


@models.command(name="add")
@click.argument("model_id")
@click.option(
    "--base-url", help="An OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1 (default: OpenRouter)."
)
@click.option(
    "--api-key-env",
    help='The environment variable holding its API key; "" sends none (default: OPENROUTER_API_KEY).',
)
def add(model_id: str, base_url: str | None, api_key_env: str | None) -> None:
    """Add model MODEL_ID (as its endpoint names it) to your models file: OABENCH_MODELS_FILE, or
    models.toml in the working directory when that is unset (then export it, as the last line says)."""
    from oabench_pipeline.core.models_registry import load_registries

    settings = Settings.from_env()
    configured = settings.models_file != DEFAULT_MODELS_FILE.resolve()
    target = settings.models_file if configured else USER_MODELS_FILE.resolve()
    table: dict[str, object] = {"id": model_id}
    if base_url is not None:
        table["base_url"] = base_url
    if api_key_env is not None:
        table["api_key_env"] = api_key_env
    try:
        added = new_entry(table)
        packaged_models = load_registries(DEFAULT_MODELS_FILE)
        packaged = {m.key for m in packaged_models}
        table = with_packaged_facts(table, added, packaged_models)
        if target.is_file() and added.key in {m.key for m in load_registries(target)}:
            raise click.ClickException(f"{added.key} is already in {target}: edit its entry there")
        append_entry(target, table)  # the whole file validated again before it is replaced
    except ValueError as error:  # ModelsRegistryError (file:line: field): the file is left as it was
        raise click.ClickException(str(error)) from None
    replaces = " (it replaces the packaged entry of that key)" if added.key in packaged else ""
    click.echo(f"added {added.key} to {target}{replaces}")
    if not configured:
        click.echo(
            f"export OABENCH_MODELS_FILE={target} so that oabench reads it (added to the packaged models)"
        )
    click.echo(f"`oabench run --models {added.key} --dry-run` shows its calls and their cost")


def with_packaged_facts(
    table: dict[str, object], added: ModelConfig, packaged: list[ModelConfig]
) -> dict[str, object]:
    """`table` with what the packaged registry says of the same model: the label and provider of the entry
    of the same key (which the new one replaces), else the provider of an entry of the same id (another
    configuration of that model), and its knowledge cutoff, so reports name and date it as before."""
    same_key = [m for m in packaged if m.key == added.key]
    same_id = same_key or [m for m in packaged if m.id == added.id]
    if not same_id:
        return table
    source = same_id[0]
    facts: dict[str, object] = {"label": source.label} if same_key else {}
    facts["provider"] = source.provider
    if source.knowledge_cutoff is not None:
        facts["knowledge_cutoff"] = source.knowledge_cutoff
    return {"id": table["id"], **facts, **{k: v for k, v in table.items() if k != "id"}}


def new_entry(table: dict[str, object]) -> ModelConfig:
    """The entry `table` makes, or a one-line error naming the option at fault (nothing is written)."""
    from oabench_pipeline.core.models_registry import ModelsRegistryError, parse_models_registry

    try:
        [model] = parse_models_registry("[[models]]\n" + tomli_w.dumps(table), Path("models.toml"))
    except ModelsRegistryError as error:
        option = {"id": "MODEL_ID", "base_url": "--base-url", "api_key_env": "--api-key-env"}
        raise click.ClickException(f"{option.get(error.field or '', error.field)}: {error.problem}") from None
    return model


def append_entry(path: Path, table: dict[str, object]) -> None:
    """Add one `[[models]]` table to `path` (created if absent), keeping what it holds: the whole file is
    validated before it is replaced, so a file the registry loader would refuse is never written. Written
    as a `[[models]]` header and its lines, the form people edit (tomli_w would inline a short table)."""
    from oabench_pipeline.core.files import write_atomically
    from oabench_pipeline.core.models_registry import parse_models_registry

    existing = path.read_text(encoding="utf-8") if path.is_file() else ""
    block = "[[models]]\n" + tomli_w.dumps(table)
    text = existing.rstrip("\n") + "\n\n" + block if existing.strip() else block
    parse_models_registry(text, path)
    write_atomically(path, text)

"""More editions than the packaged registry has, without PDFs: for suites that span more than the study.

`register_more_editions` extends an environment's editions registry with made-up editions (their files
pinned by made-up hashes: they are never downloaded) and `[suites]`, then writes their exam tables into
the warehouse as `oabench ingest` would have left them, each a copy of an ingested edition's questions
and key under its own number. Cheap (no PDF, no Dagster run), and real: the registry is a file the CLI
reads through `OABENCH_EDITIONS_FILE`, the tables are partitions the warehouse reads back.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping, Sequence

import polars as pl

from oabench_pipeline.core.editions import DEFAULT_EDITIONS_FILE
from oabench_pipeline_tests.pipeline_env import PipelineEnv


def _edition_block(edition: int) -> str:
    def pin(kind: str) -> str:
        return hashlib.sha256(f"made-up {kind} of edition {edition}".encode()).hexdigest()

    return f"""
[[editions]]
edition = {edition}
exam_name = "{edition}º EXAME DE ORDEM UNIFICADO"
exam_date = {dt.date(2010, 6, 1) + dt.timedelta(days=120 * edition)}
exam_page_url = "https://examedeordem.oab.org.br/EditaisProvas?NumeroExame={edition}"
area_scheme = "fgv-2025"

[editions.booklet]
label = "Caderno de Prova - Tipo 1"
url = "https://s.oab.org.br/arquivos/made-up/{edition}-caderno.pdf"
sha256 = "{pin("booklet")}"

[editions.answer_key]
label = "Gabaritos Definitivos"
url = "https://s.oab.org.br/arquivos/made-up/{edition}-gabarito.pdf"
sha256 = "{pin("answer_key")}"
"""


def _renumbered(frame: pl.DataFrame, edition: int) -> pl.DataFrame:
    return frame.with_columns(
        edition=pl.lit(edition, pl.Int32),
        qid=pl.format("oab-{}-1f-q{}", pl.lit(edition), pl.col("number")),
    )


def register_more_editions(
    env: PipelineEnv,
    editions: Sequence[int],
    suites: Mapping[str, Sequence[int]] = {},
    copy_of: int = 45,
) -> None:
    """The packaged registry plus `editions` and `suites` (name → editions) as `OABENCH_EDITIONS_FILE`,
    and each new edition ingested as a copy of edition `copy_of`'s questions and answer key."""
    registry = DEFAULT_EDITIONS_FILE.read_text(encoding="utf-8")
    tables = "".join(
        f'\n[suites.{name}]\ndescription = "made up"\neditions = {list(numbers)}\n'
        for name, numbers in suites.items()
    )
    start = registry.index("[area_schemes]")
    text = (
        registry[:start]
        + tables.lstrip("\n")
        + "\n"
        + registry[start:]
        + "".join(map(_edition_block, editions))
    )
    path = env.root / "editions.toml"
    path.write_text(text, encoding="utf-8")
    env.set("OABENCH_EDITIONS_FILE", path)
    warehouse = env.warehouse
    for table in ("questions", "answer_keys"):
        source = warehouse.read(table, str(copy_of))
        for edition in editions:
            warehouse.write_partition(table, _renumbered(source, edition), str(edition))
    known = warehouse.read("editions")
    template = known.filter(pl.col("edition") == copy_of)
    added = [
        template.with_columns(
            edition=pl.lit(e, pl.Int32),
            exam_name=pl.lit(f"{e}º EXAME DE ORDEM UNIFICADO"),
            exam_date=pl.lit(dt.date(2010, 6, 1) + dt.timedelta(days=120 * e)),
        )
        for e in editions
    ]
    warehouse.write_partition(
        "editions", pl.concat([known.filter(~pl.col("edition").is_in(editions)), *added])
    )

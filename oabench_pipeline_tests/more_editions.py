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
import tomllib
from collections.abc import Mapping, Sequence

import polars as pl
import tomli_w

from oabench_pipeline.core.editions import DEFAULT_EDITIONS_FILE, DEFAULT_SUITE
from oabench_pipeline_tests.pipeline_env import PipelineEnv

STUDY = (43, 44, 45)


def _made_up_edition(edition: int, template: dict) -> dict:
    """A registry entry for `edition` in the packaged entries' shape, its files pinned by made-up hashes."""

    def pinned(kind: str) -> dict:
        digest = hashlib.sha256(f"made-up {kind} of edition {edition}".encode()).hexdigest()
        return {
            "label": kind,
            "url": f"https://s.oab.org.br/arquivos/made-up/{edition}-{kind}.pdf",
            "sha256": digest,
        }

    return {
        **template,
        "edition": edition,
        "exam_name": f"{edition}º EXAME DE ORDEM UNIFICADO",
        "exam_date": dt.date(2010, 6, 1) + dt.timedelta(days=120 * edition),
        "booklet": pinned("booklet"),
        "answer_key": pinned("answer_key"),
    }


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
    """A registry of the study's editions (the packaged entries), `editions` and `suites` (name → editions)
    as `OABENCH_EDITIONS_FILE`, and each new edition ingested as a copy of edition `copy_of`'s questions and
    answer key. Built from the packaged file's study editions and `oabench-2026` only, so it means the same
    whatever else the packaged registry holds."""
    packaged = tomllib.loads(DEFAULT_EDITIONS_FILE.read_text(encoding="utf-8"))
    study = [e for e in packaged["editions"] if e["edition"] in STUDY]
    template = next(e for e in study if e["edition"] == copy_of)
    document = {
        "suites": {
            DEFAULT_SUITE: packaged["suites"][DEFAULT_SUITE],
            **{
                name: {"description": "made up", "editions": list(numbers)}
                for name, numbers in suites.items()
            },
        },
        "area_schemes": packaged["area_schemes"],
        "editions": [*study, *(_made_up_edition(e, template) for e in editions)],
    }
    path = env.root / "editions.toml"
    path.write_text(tomli_w.dumps(document), encoding="utf-8")
    env.set("OABENCH_EDITIONS_FILE", path)
    warehouse = env.warehouse
    for table in ("questions", "answer_keys"):
        source = warehouse.read(table, str(copy_of))
        for edition in editions:
            warehouse.write_partition(table, _renumbered(source, edition), str(edition))
    known = warehouse.read("editions").filter(pl.col("edition").is_in(STUDY))
    row = known.filter(pl.col("edition") == copy_of)
    added = [
        row.with_columns(
            edition=pl.lit(e, pl.Int32),
            exam_name=pl.lit(f"{e}º EXAME DE ORDEM UNIFICADO"),
            exam_date=pl.lit(dt.date(2010, 6, 1) + dt.timedelta(days=120 * e)),
        )
        for e in editions
    ]
    warehouse.write_partition("editions", pl.concat([known, *added]))

"""Bad exam input through the real pipeline (`oabench ingest`): a clear error, and nothing damaged.

Every case starts from a warehouse already holding the three good editions (`fresh_env`), forces the
edition-44 files to be fetched again, serves something wrong in their place, and checks that the run
fails with a message naming the edition, the URL and (where it means something) the expected and actual
SHA-256, while the `questions` and `answer_keys` partition files stay byte-identical and the good raw
files stay in the store untouched.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from oabench_pipeline.core.editions import (
    DEFAULT_EDITIONS_FILE,
    Edition,
    FileKind,
    editions_by_key,
    load_editions,
)
from oabench_pipeline_tests.core.synthetic_pdfs import answer_letters, make_answer_key_pdf
from oabench_pipeline_tests.pipeline_env import PipelineEnv
from oabench_pipeline_tests.saved_envs import fresh_env_with_instance_per_module
from oabench_pipeline_tests.servers.static_files import Override, StaticFileServer

PROTECTED_TABLES = ("questions", "answer_keys")


ingested_with_instance, fresh_env = fresh_env_with_instance_per_module("bad-sources")


@pytest.fixture(scope="module")
def registry() -> dict[str, Edition]:
    return editions_by_key(load_editions())


def url_path(url: str) -> str:
    """The path of an official URL, which is also its path on the mirror server."""
    return "/" + url.split("://", 1)[1].split("/", 1)[1]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def registry_with_pin(
    target: Path, edition: int, kind: FileKind, *, url: str, sha: str, size: int | None
) -> Path:
    """A copy of the packaged editions registry where one file of one edition is pinned differently."""
    head, *blocks = DEFAULT_EDITIONS_FILE.read_text(encoding="utf-8").split("[[editions]]")
    index = next(i for i, block in enumerate(blocks) if re.search(rf"(?m)^edition = {edition}$", block))
    section = f"[editions.{kind}]"
    before, after = blocks[index].split(section, 1)
    # count=1: the first url/sha256/bytes after the section header belong to that section.
    after = re.sub(r'(?m)^url = ".*"$', f'url = "{url}"', after, count=1)
    after = re.sub(r'(?m)^sha256 = ".*"$', f'sha256 = "{sha}"', after, count=1)
    after = re.sub(r"(?m)^bytes = \d+$", f"bytes = {size}" if size else "", after, count=1)
    blocks[index] = before + section + after
    target.write_text("[[editions]]".join([head, *blocks]), encoding="utf-8")
    pinned = editions_by_key(load_editions(target))[str(edition)].file(kind)
    assert (pinned.url, pinned.sha256) == (url, sha), "the registry edit did not take"
    return target


@dataclass(frozen=True)
class Snapshot:
    """The bytes of the protected partition files and of every raw file."""

    tables: dict[str, bytes]
    raw: dict[str, bytes]

    @classmethod
    def of(cls, env: PipelineEnv) -> Snapshot:
        tables_dir = env.warehouse.tables_dir
        tables = {
            str(p.relative_to(tables_dir)): p.read_bytes()
            for table in PROTECTED_TABLES
            for p in sorted((tables_dir / table).glob("*.parquet"))
        }
        raw = {p.name: p.read_bytes() for p in sorted(env.settings.raw_dir.iterdir())}
        return cls(tables, raw)


def assert_nothing_damaged(env: PipelineEnv, before: Snapshot) -> None:
    """Partition files byte-identical; raw store exactly as before (nothing new, nothing altered)."""
    after = Snapshot.of(env)
    assert after.tables == before.tables
    assert "44.parquet" in {Path(name).name for name in after.tables}
    assert after.raw == before.raw
    for name, data in after.raw.items():
        assert sha256(data) == name, f"raw file {name} does not match its name"


def failed_ingest(env: PipelineEnv, edition: str) -> str:
    result = env.cli("ingest", "--editions", edition)
    assert result.exit_code != 0, result.output
    assert f"edition {edition}: FAILED" in result.output
    return result.output


# -- (a)-(d): the download itself is wrong -------------------------------------------------------------


def _tampered(data: bytes) -> bytes:
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0x01
    return bytes(flipped)


def _truncated(data: bytes) -> bytes:
    return data[: len(data) // 3]


HTML_ERROR = b"<!DOCTYPE html><html><body><h1>Erro</h1><p>Arquivo indisponivel.</p></body></html>"


@dataclass(frozen=True)
class BadDownload:
    kind: FileKind
    served: Callable[[bytes], Override]
    says: str  # a fragment of the failure text for this kind of problem
    actual_hash_relevant: bool = True


BAD_DOWNLOADS = {
    "tampered-byte": BadDownload("booklet", lambda real: Override(_tampered(real)), "SHA-256 mismatch"),
    "truncated": BadDownload("answer_key", lambda real: Override(_truncated(real)), "truncated download"),
    "html-error-page-200": BadDownload(
        "booklet", lambda real: Override(HTML_ERROR, content_type="text/html"), "got an HTML page"
    ),
    "not-found-404": BadDownload(
        "answer_key",
        lambda real: Override(b"<html>404</html>", status=404, content_type="text/html"),
        "HTTP 404",
        actual_hash_relevant=False,
    ),
}


@pytest.mark.parametrize("case", BAD_DOWNLOADS.values(), ids=BAD_DOWNLOADS.keys())
def test_bad_download_fails_clearly_and_damages_nothing(
    case: BadDownload,
    fresh_env: PipelineEnv,
    mirror_server: StaticFileServer,
    registry: dict[str, Edition],
    shared_oab: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pinned = registry["44"].file(case.kind)
    path = url_path(pinned.url)
    override = case.served((shared_oab / "mirror" / path.lstrip("/")).read_bytes())
    monkeypatch.setitem(mirror_server.overrides, path, override)
    (fresh_env.settings.raw_dir / pinned.sha256).unlink()  # force a download
    before = Snapshot.of(fresh_env)
    requests_before = mirror_server.requests[path]

    output = failed_ingest(fresh_env, "44")

    assert case.says in output
    assert f"edition 44 {case.kind.replace('_', ' ')} ({mirror_server.base_url}{path})" in output
    if case.actual_hash_relevant:
        assert pinned.sha256 in output
        assert sha256(override.body) in output
    assert mirror_server.requests[path] - requests_before == 1  # permanent problems are not retried
    assert_nothing_damaged(fresh_env, before)


# -- (e)-(f): a well-pinned answer key whose content is wrong ------------------------------------------


def _key_without_row(letters: dict[int, str | None]) -> dict[int, str | None]:
    return {n: letter for n, letter in letters.items() if n != 17}


def _key_with_letter_e(letters: dict[int, str | None]) -> dict[int, str | None]:
    return {**letters, 5: "E"}


BAD_KEYS = {
    "missing-row": (_key_without_row, "missing question numbers [17]"),
    "letter-outside-a-d": (_key_with_letter_e, "answer key has 'E' for question 5"),
}


@pytest.mark.parametrize(("damage", "says"), BAD_KEYS.values(), ids=BAD_KEYS.keys())
def test_bad_answer_key_content_fails_clearly_and_damages_nothing(
    damage: Callable[[dict[int, str | None]], dict[int, str | None]],
    says: str,
    fresh_env: PipelineEnv,
    mirror_server: StaticFileServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key_pdf = make_answer_key_pdf(44, damage(answer_letters(80, seed=44)))
    url = "https://s.oab.org.br/arquivos/2030/01/bad-key-44.pdf"
    monkeypatch.setitem(mirror_server.overrides, url_path(url), Override(key_pdf))
    editions_file = registry_with_pin(
        tmp_path / "editions.toml", 44, "answer_key", url=url, sha=sha256(key_pdf), size=len(key_pdf)
    )
    fresh_env.set("OABENCH_EDITIONS_FILE", editions_file)
    before = Snapshot.of(fresh_env)

    output = failed_ingest(fresh_env, "44")

    assert f"edition 44 answer key ({url})" in output
    assert says in output
    # The pinned file itself was fine: it was verified and stored under its own hash, nothing else moved.
    after = Snapshot.of(fresh_env)
    assert after.raw.pop(sha256(key_pdf)) == key_pdf
    assert after.raw == before.raw
    assert after.tables == before.tables


# -- (g): the right hash of the wrong edition ----------------------------------------------------------


def test_45th_booklet_pinned_as_44th_is_stopped_by_the_header_check(
    fresh_env: PipelineEnv,
    mirror_server: StaticFileServer,
    registry: dict[str, Edition],
    tmp_path: Path,
) -> None:
    booklet_45 = registry["45"].booklet
    editions_file = registry_with_pin(
        tmp_path / "editions.toml",
        44,
        "booklet",
        url=booklet_45.url,
        sha=booklet_45.sha256,
        size=booklet_45.bytes,
    )
    fresh_env.set("OABENCH_EDITIONS_FILE", editions_file)
    (fresh_env.settings.raw_dir / booklet_45.sha256).unlink()  # force a download (it verifies fine)
    before = Snapshot.of(fresh_env)
    requests_before = mirror_server.requests[url_path(booklet_45.url)]

    output = failed_ingest(fresh_env, "44")

    assert mirror_server.requests[url_path(booklet_45.url)] - requests_before == 1
    assert "booklet_edition_matches: header says edition 45, registry says 44" in output
    assert f"edition 44 booklet ({booklet_45.url})" in output and "nothing was written" in output
    after = Snapshot.of(fresh_env)
    assert after.tables == before.tables
    assert after.raw == {**before.raw, booklet_45.sha256: after.raw[booklet_45.sha256]}
    assert sha256(after.raw[booklet_45.sha256]) == booklet_45.sha256
    assert_failed_check_recorded(
        "questions", "booklet_edition_matches", "44", "header says edition 45, registry says 44"
    )


def assert_failed_check_recorded(asset: str, check_name: str, partition: str, problem: str) -> None:
    """The blocking check's failure is stored as a failed evaluation (the Checks tab), and the partition
    shows as failed, not materialized."""
    from dagster import AssetCheckKey, AssetKey, DagsterInstance, partition_loading_context
    from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
    from dagster._core.storage.partition_status_cache import AssetPartitionStatus

    from oabench_pipeline.shared.partitions import editions_partitions

    with DagsterInstance.get() as instance:
        key = AssetCheckKey(AssetKey(asset), check_name)
        latest = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)[0]
        assert latest.status == AssetCheckExecutionRecordStatus.FAILED
        evaluation = latest.event.dagster_event.event_specific_data
        assert evaluation.passed is False and problem in evaluation.metadata["problems"].value
        with partition_loading_context(dynamic_partitions_store=instance):
            status = instance.get_status_by_partition(AssetKey(asset), [partition], editions_partitions)
        assert status == {partition: AssetPartitionStatus.FAILED}

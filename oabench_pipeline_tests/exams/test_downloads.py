"""`PdfDownloader`, `source_location` and `RawStore` against the real mirror served on loopback.

What is pinned here: where a file is fetched from (official host, HTTP mirror, local folder), that a
verified stored copy costs no request, that a corrupted one is never trusted, that transient failures
are retried a bounded number of times and permanent ones are not, and that giving up says what, where
and which hash was expected.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from oabench_pipeline.core.editions import Edition, editions_by_key, load_editions
from oabench_pipeline.exams.downloads import DownloadError, DownloadPolicy, PdfDownloader, source_location
from oabench_pipeline.shared.raw_store import RawStore, sha256_of
from oabench_pipeline_tests.servers.static_files import Override, StaticFileServer

# No back-off between attempts: the retry count is what matters, not the wall-clock pauses.
FAST = DownloadPolicy(max_attempts=3, backoff_s=0.0, connect_timeout_s=5.0, read_timeout_s=10.0)


@pytest.fixture(scope="module")
def edition_44() -> Edition:
    return editions_by_key(load_editions())["44"]


def _url_path(url: str) -> str:
    """The path part of an official URL, which is also the path on the mirror server."""
    return "/" + url.split("://", 1)[1].split("/", 1)[1]


def _leftovers(store: RawStore) -> list[str]:
    """Staging files left behind in the store (a failed download must clean up after itself)."""
    return sorted(p.name for p in store.root.glob(".incoming-*")) if store.root.exists() else []


# -- source_location -----------------------------------------------------------------------------------

OFFICIAL = "https://s.oab.org.br/arquivos/2025/08/fda2cc49.pdf"


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        (None, OFFICIAL),
        ("", OFFICIAL),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000/arquivos/2025/08/fda2cc49.pdf"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000/arquivos/2025/08/fda2cc49.pdf"),
        ("https://mirror.example/oab/", "https://mirror.example/oab/arquivos/2025/08/fda2cc49.pdf"),
        ("/data/mirror", "/data/mirror/arquivos/2025/08/fda2cc49.pdf"),
        ("/data/mirror/", "/data/mirror/arquivos/2025/08/fda2cc49.pdf"),
        ("file:///data/mirror", "/data/mirror/arquivos/2025/08/fda2cc49.pdf"),
        ("../shared/oab/mirror", "../shared/oab/mirror/arquivos/2025/08/fda2cc49.pdf"),
    ],
)
def test_source_location_replaces_scheme_and_host(base: str | None, expected: str) -> None:
    assert source_location(OFFICIAL, base) == expected


def test_a_mirror_folder_holds_percent_escaped_paths_under_their_decoded_names(shared_oab: Path) -> None:
    """The 37th's booklet URL escapes spaces and `º`; the folder has the file as an HTTP server would map it."""
    url = "https://raw.githubusercontent.com/o/r/c/1A%20FASE%20OAB/37%C2%BA%20EXAME.pdf"
    assert source_location(url, "/m") == "/m/o/r/c/1A FASE OAB/37º EXAME.pdf"
    assert (
        source_location(url, "http://127.0.0.1:9")
        == "http://127.0.0.1:9/o/r/c/1A%20FASE%20OAB/37%C2%BA%20EXAME.pdf"
    )
    archive = json.loads((shared_oab / "archive-manifest.json").read_text(encoding="utf-8"))
    [entry] = [e for e in archive["editions"] if e["edition"] == 37]
    assert Path(source_location(entry["booklet"]["url"], str(shared_oab / "mirror"))).is_file()


def test_source_location_keeps_the_query_for_an_http_mirror() -> None:
    url = "https://s.oab.org.br/arquivos/x.pdf?v=2"
    assert source_location(url, "http://127.0.0.1:9") == "http://127.0.0.1:9/arquivos/x.pdf?v=2"


# -- fetching ------------------------------------------------------------------------------------------


def test_http_mirror_download_lands_under_its_hash(
    tmp_path: Path, mirror_server: StaticFileServer, edition_44: Edition, shared_oab: Path
) -> None:
    path = _url_path(edition_44.booklet.url)
    before = mirror_server.requests[path]
    store = RawStore(tmp_path / "raw")

    fetched = PdfDownloader(store, mirror_server.base_url, FAST).fetch(edition_44, "booklet")

    assert fetched.downloaded
    assert fetched.url == edition_44.booklet.url
    assert fetched.source_url == mirror_server.base_url + path
    assert fetched.path == store.path_for(edition_44.booklet.sha256)
    assert fetched.path.read_bytes() == (shared_oab / "mirror" / path.lstrip("/")).read_bytes()
    assert fetched.size == edition_44.booklet.bytes
    assert mirror_server.requests[path] - before == 1
    assert _leftovers(store) == []


@pytest.mark.parametrize("scheme", ["", "file://"])
def test_local_folder_mirror_needs_no_server(
    tmp_path: Path, mirror_server: StaticFileServer, edition_44: Edition, shared_oab: Path, scheme: str
) -> None:
    requests_before = mirror_server.total_requests
    store = RawStore(tmp_path / "raw")

    fetched = PdfDownloader(store, f"{scheme}{shared_oab / 'mirror'}", FAST).fetch(edition_44, "answer_key")

    assert fetched.downloaded
    assert fetched.source_url == str(shared_oab / "mirror" / _url_path(edition_44.answer_key.url).lstrip("/"))
    assert sha256_of(fetched.path) == edition_44.answer_key.sha256
    assert mirror_server.total_requests == requests_before


def test_missing_local_file_names_edition_and_path(tmp_path: Path, edition_44: Edition) -> None:
    store = RawStore(tmp_path / "raw")
    with pytest.raises(DownloadError) as raised:
        PdfDownloader(store, str(tmp_path / "empty-mirror"), FAST).fetch(edition_44, "booklet")
    message = str(raised.value)
    assert "edition 44 booklet" in message
    assert str(tmp_path / "empty-mirror" / "arquivos") in message
    assert "no such file" in message
    assert store.verified_path(edition_44.booklet.sha256) is None


def test_verified_stored_file_is_reused_without_any_request(
    tmp_path: Path, mirror_server: StaticFileServer, edition_44: Edition
) -> None:
    downloader = PdfDownloader(RawStore(tmp_path / "raw"), mirror_server.base_url, FAST)
    first = downloader.fetch(edition_44, "booklet")
    requests_before = mirror_server.total_requests

    again = downloader.fetch(edition_44, "booklet")

    assert first.downloaded and not again.downloaded
    assert again.path == first.path
    assert again.size == first.size
    assert mirror_server.total_requests == requests_before


def test_corrupted_stored_file_is_downloaded_again(
    tmp_path: Path, mirror_server: StaticFileServer, edition_44: Edition, shared_oab: Path
) -> None:
    store = RawStore(tmp_path / "raw")
    pinned = edition_44.answer_key
    original = (shared_oab / "mirror" / _url_path(pinned.url).lstrip("/")).read_bytes()
    corrupted = bytearray(original)
    corrupted[len(corrupted) // 2] ^= 0xFF
    store.root.mkdir(parents=True)
    store.path_for(pinned.sha256).write_bytes(bytes(corrupted))
    path = _url_path(pinned.url)
    before = mirror_server.requests[path]

    fetched = PdfDownloader(store, mirror_server.base_url, FAST).fetch(edition_44, "answer_key")

    assert fetched.downloaded
    assert mirror_server.requests[path] - before == 1
    assert store.path_for(pinned.sha256).read_bytes() == original


def test_transient_503_is_retried_then_succeeds(
    tmp_path: Path,
    mirror_server: StaticFileServer,
    edition_44: Edition,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = _url_path(edition_44.booklet.url)
    busy = Override(b"<html>busy</html>", status=503, content_type="text/html")
    monkeypatch.setitem(mirror_server.queued, path, [busy, busy])
    before = mirror_server.requests[path]
    store = RawStore(tmp_path / "raw")

    fetched = PdfDownloader(store, mirror_server.base_url, FAST).fetch(edition_44, "booklet")

    assert fetched.downloaded
    assert mirror_server.requests[path] - before == 3
    assert sha256_of(fetched.path) == edition_44.booklet.sha256
    assert _leftovers(store) == []
    # The retries are logged on the "stamina" logger, never printed into `oabench ingest`'s stdout.
    assert capsys.readouterr().out == ""
    assert [r.name for r in caplog.records if r.getMessage() == "stamina.retry_scheduled"] == ["stamina"] * 2


def test_connection_that_keeps_failing_gives_up_after_bounded_attempts(
    tmp_path: Path, mirror_server: StaticFileServer, edition_44: Edition, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _url_path(edition_44.booklet.url)
    monkeypatch.setitem(mirror_server.overrides, path, Override(drop_connection=True))
    before = mirror_server.requests[path]
    store = RawStore(tmp_path / "raw")

    with pytest.raises(DownloadError) as raised:
        PdfDownloader(store, mirror_server.base_url, FAST).fetch(edition_44, "booklet")

    message = str(raised.value)
    assert "edition 44 booklet" in message
    assert mirror_server.base_url + path in message
    assert edition_44.booklet.sha256 in message
    assert "gave up after 3 attempts" in message
    assert mirror_server.requests[path] - before == FAST.max_attempts
    assert store.verified_path(edition_44.booklet.sha256) is None
    assert _leftovers(store) == []


def test_permanent_404_is_not_retried(
    tmp_path: Path, mirror_server: StaticFileServer, edition_44: Edition, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _url_path(edition_44.answer_key.url)
    monkeypatch.setitem(
        mirror_server.overrides, path, Override(b"gone", status=404, content_type="text/html")
    )
    before = mirror_server.requests[path]

    with pytest.raises(DownloadError, match=r"edition 44 answer key .*HTTP 404"):
        PdfDownloader(RawStore(tmp_path / "raw"), mirror_server.base_url, FAST).fetch(
            edition_44, "answer_key"
        )

    assert mirror_server.requests[path] - before == 1


def test_wrong_bytes_never_replace_a_good_stored_file(
    tmp_path: Path, mirror_server: StaticFileServer, edition_44: Edition, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A good copy of one file stays intact while a tampered copy of the other is refused."""
    store = RawStore(tmp_path / "raw")
    downloader = PdfDownloader(store, mirror_server.base_url, FAST)
    good = downloader.fetch(edition_44, "answer_key").path.read_bytes()
    tampered = b"%PDF-1.7\n" + b"x" * (edition_44.booklet.bytes or 1000)
    monkeypatch.setitem(mirror_server.overrides, _url_path(edition_44.booklet.url), Override(tampered))

    with pytest.raises(DownloadError) as raised:
        downloader.fetch(edition_44, "booklet")

    assert hashlib.sha256(tampered).hexdigest() in str(raised.value)
    assert store.path_for(edition_44.answer_key.sha256).read_bytes() == good
    assert sorted(p.name for p in store.root.iterdir()) == [edition_44.answer_key.sha256]


# -- the raw store -------------------------------------------------------------------------------------


def test_raw_store_trusts_only_files_matching_their_name(tmp_path: Path) -> None:
    store = RawStore(tmp_path / "raw")
    body = b"%PDF-1.4 some bytes"
    sha = hashlib.sha256(body).hexdigest()
    assert store.verified_path(sha) is None

    with store.staging_file() as staged:
        staged.write(body)
    assert Path(staged.name).parent == store.root  # same folder: promoting is an atomic rename
    promoted = store.promote(Path(staged.name), sha)

    assert promoted == store.path_for(sha)
    assert store.verified_path(sha) == promoted
    assert not Path(staged.name).exists()
    promoted.write_bytes(body + b"!")
    assert store.verified_path(sha) is None


def test_host_that_drips_a_byte_at_a_time_hits_the_overall_deadline(
    tmp_path: Path, mirror_server: StaticFileServer, edition_44: Edition, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each read gets a byte well within the read timeout; only the overall deadline stops it."""
    path = _url_path(edition_44.booklet.url)
    monkeypatch.setitem(
        mirror_server.overrides, path, Override(b"%PDF-1.7 " + b"x" * 200, drip_interval_s=0.2)
    )
    before = mirror_server.requests[path]
    store = RawStore(tmp_path / "raw")
    policy = DownloadPolicy(max_attempts=3, backoff_s=0.0, read_timeout_s=10.0, deadline_s=1.0)

    with pytest.raises(DownloadError) as raised:
        PdfDownloader(store, mirror_server.base_url, policy).fetch(edition_44, "booklet")

    message = str(raised.value)
    assert message.startswith(f"edition 44 booklet ({mirror_server.base_url + path}): not complete after 1 s")
    assert "OABENCH_DOWNLOAD_TIMEOUT_S" in message and "nothing was stored" in message
    assert mirror_server.requests[path] - before == 1, "a deadline is not retried"
    assert store.verified_path(edition_44.booklet.sha256) is None
    assert _leftovers(store) == []


def test_ingest_honours_the_download_deadline_from_the_environment(
    tmp_path: Path, mirror_server: StaticFileServer, edition_44: Edition, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oabench_pipeline_tests.pipeline_env import make_env

    env = make_env(tmp_path, monkeypatch, mirror_server.base_url)
    env.set("OABENCH_DOWNLOAD_TIMEOUT_S", "1")
    path = _url_path(edition_44.booklet.url)
    monkeypatch.setitem(
        mirror_server.overrides, path, Override(b"%PDF-1.7 " + b"x" * 200, drip_interval_s=0.2)
    )
    result = env.cli("ingest", "--editions", "44")
    assert result.exit_code == 1, result.output
    assert "edition 44: FAILED" in result.output
    assert "not complete after 1 s" in result.output
    assert "Traceback" not in result.output
    assert not env.warehouse.has_table("questions")

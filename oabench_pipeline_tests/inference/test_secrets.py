"""The API key must never be stored or printed, in any form, even when an endpoint echoes it back.

The gateways here echo the Authorization header in their errors (and one in every answer) verbatim and in
the forms a careless proxy writes it: upper-cased, percent-encoded, base64 of the key, of `Bearer <key>`,
of `<user>:<key>` and inside a longer base64 string at each byte alignment, JSON `\\u`-escaped. The CLI
runs as a real subprocess, so its stdout and stderr are exactly what a user (or a CI log) would keep; the
files are read as what they hold (Parquet rows, SQLite rows), and searched for every form by a decoder of
the test's own, not by the pipeline's redaction.
"""

from __future__ import annotations

import base64
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, unquote

import polars as pl
import pytest

from oabench_pipeline.inference.response_log import cell_log_path, read_log
from oabench_pipeline.shared.partitions import cell_partition_key
from oabench_pipeline_tests.inference.replay import TEST_KEY, TEST_KEY_ENV
from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file
from oabench_pipeline_tests.servers.openai_replay import FaultProfile, ReplayServer

# Slow: an `oabench` process against echoing gateways, every output searched.
# Left out of the default run; `.ci/run` runs it after (`pytest -m slow`).
pytestmark = pytest.mark.slow

EDITION = "45"
OABENCH = Path(sys.executable).parent / "oabench"


def oabench(env: PipelineEnv, *args: str) -> subprocess.CompletedProcess[bytes]:
    """`oabench ARGS` in a child process with the test environment (monkeypatched os.environ)."""
    child_env = {**os.environ, "OABENCH_LOG_LEVEL": "INFO"}  # Dagster's console log on stderr too
    return subprocess.run(
        [str(OABENCH), *args], cwd=env.root, env=child_env, capture_output=True, timeout=900, check=False
    )


def files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def key_forms(key: str) -> dict[str, str]:
    """How a gateway may write the key back (see the module docstring)."""
    b64, raw = base64.b64encode, key.encode()
    return {
        "verbatim": key,
        "upper": key.upper(),
        "percent": quote(key, safe=""),
        "percent-every-byte": "".join(f"%{byte:02x}" for byte in raw),
        "base64": b64(raw).decode(),
        "base64-bearer": b64(b"Bearer " + raw).decode(),
        "base64-basic-auth": b64(b"gateway-user:" + raw).decode(),
        "base64-inside-1": b64(b"x" + raw + b"-tail").decode(),
        "base64-inside-2": b64(b"xy" + raw + b"!").decode(),
        "base64-urlsafe": base64.urlsafe_b64encode(b"\xfb\xff" + raw).decode(),
        "json-escaped": "".join(f"\\u{ord(c):04x}" for c in key),
    }


def echo_every_form(auth: str) -> str:
    return "; ".join(f"{name}={form}" for name, form in key_forms(auth.removeprefix("Bearer ")).items())


def leaked_forms(text: str, key: str) -> list[str]:
    """Which forms of `key` `text` holds: searched in the text, percent-decoded, JSON-unescaped, both."""
    unescaped = re.sub(r"\\+u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
    variants = {text, unescaped} | ({unquote(text), unquote(unescaped)} if "%" in text else set())
    raw = key.encode()
    cores = {  # what base64 of any text holding the key contains, at each byte alignment
        encode(raw[skip : skip + (len(raw) - skip) // 3 * 3]).decode()
        for skip in range(3)
        for encode in (base64.b64encode, base64.urlsafe_b64encode)
    }
    found = ["the key"] if any(key.lower() in v.lower() for v in variants) else []
    return found + [f"base64 {core}" for core in sorted(cores) if any(core in v for v in variants)]


def texts_of(path: Path) -> str:
    """What a file holds, as text: the rows of a Parquet or SQLite file, else its bytes."""
    if path.suffix == ".parquet":
        return str(pl.read_parquet(path).rows())
    if path.suffix in (".db", ".sqlite"):
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
            tables = [name for (name,) in con.execute("select name from sqlite_master where type = 'table'")]
            return "\n".join(str(con.execute(f'select * from "{t}"').fetchall()) for t in tables)
    return path.read_bytes().decode("utf-8", errors="replace")


def leaks_under(root: Path, key: str) -> dict[str, list[str]]:
    """Every file below `root` holding a form of `key`, but the official PDFs (`raw/`: SHA-256 pinned)."""
    return {
        str(path.relative_to(root)): found
        for path in sorted(root.rglob("*"))
        if path.is_file()
        and path.relative_to(root).parts[0] != "raw"
        and (found := leaked_forms(texts_of(path), key))
    }


def test_key_is_in_no_file_and_no_output_in_any_form(fresh_env: PipelineEnv) -> None:
    forms = key_forms(TEST_KEY)
    assert [name for name, form in forms.items() if not leaked_forms(form, TEST_KEY)] == []  # all seen
    echo = {"echo_authorization": True, "echo_as": echo_every_form}
    with (
        ReplayServer(api_key=TEST_KEY) as ok,
        ReplayServer(
            api_key=TEST_KEY, faults=FaultProfile(rate_5xx=0.3, max_faults_per_prompt=1, **echo)
        ) as flaky,
        ReplayServer(
            faults=FaultProfile(fixed_status=400, fixed_status_message="prompt too long", **echo)
        ) as bad,
        ReplayServer(
            faults=FaultProfile(fixed_status=401, fixed_status_message="key revoked", **echo)
        ) as denied,
        ReplayServer(api_key=TEST_KEY, faults=FaultProfile(echo_in_answers=True, **echo)) as chatty,
    ):
        fresh_env.set(TEST_KEY_ENV, TEST_KEY)
        entries = [
            {"id": "acme/ok", "base_url": ok.base_url},
            {"id": "acme/flaky", "base_url": flaky.base_url},
            {"id": "acme/echo-400", "base_url": bad.base_url},
            {"id": "acme/echo-401", "base_url": denied.base_url},
            {"id": "acme/echo-answers", "base_url": chatty.base_url},
        ]
        registry = write_models_file(
            fresh_env.root / "models.toml", [{**e, "api_key_env": TEST_KEY_ENV} for e in entries]
        )
        fresh_env.set("OABENCH_MODELS_FILE", registry)

        # One process for the four cells (a process is what this test pays for): the key rejected by one
        # endpoint stops that cell only, so the run exits 1 and the two good cells still complete.
        models = "acme/ok,acme/flaky,acme/echo-400,acme/echo-401,acme/echo-answers"
        failing = oabench(fresh_env, "run", "--models", models, "--editions", EDITION)
        assert failing.returncode == 1, failing.stderr.decode()

        # The key really was sent, and the failing endpoints really did echo it back.
        assert ok.stats.authorization_headers == {f"Bearer {TEST_KEY}"}
        assert flaky.stats.faults.get("5xx", 0) > 0
        assert bad.stats.total_requests == 80 and denied.stats.total_requests >= 1
        assert chatty.stats.total_requests == 80

    for good in ("acme/ok", "acme/flaky"):
        cell = fresh_env.warehouse.read("inferences", str(cell_partition_key(good, EDITION)))
        assert cell.height == 80 and cell["error"].null_count() == 80, good

    outputs = {"stdout": failing.stdout, "stderr": failing.stderr}
    printed = (failing.stdout + failing.stderr).decode()
    assert {name: leaked_forms(text.decode(), TEST_KEY) for name, text in outputs.items()} == {
        "stdout": [],
        "stderr": [],
    }
    warehouse_dir = fresh_env.settings.warehouse_path.parent
    dagster_home = Path(os.environ["DAGSTER_HOME"])
    assert leaks_under(warehouse_dir, TEST_KEY) == {}  # Parquet rows, response logs, reports
    assert leaks_under(dagster_home, TEST_KEY) == {}  # run and event-log storage (SQLite rows)
    assert list(dagster_home.rglob("*.db")), "the event log we scanned is there"

    # What the echoing endpoints said did land in rows, logs and output, redacted.
    assert "HTTP 401" in printed and "acme/echo-401" in printed and "***" in printed
    rows = fresh_env.warehouse.read("inferences", str(cell_partition_key("acme/echo-400", EDITION)))
    assert rows.filter(pl.col("error").str.contains("prompt too long", literal=True)).height == 80
    assert rows.filter(pl.col("error").str.contains("***", literal=True)).height == 80
    assert files_containing(warehouse_dir / "responses", b"Authorization: ***")
    assert files_containing(dagster_home, b"HTTP 401"), "the failure reached the event log we scanned"
    assert not fresh_env.warehouse.partition_path(
        "inferences", str(cell_partition_key("acme/echo-401", EDITION))
    ).exists()
    # An answer, its provenance and its reported cost can echo the key too: the text is kept, redacted.
    chatty_rows = fresh_env.warehouse.read(
        "inferences", str(cell_partition_key("acme/echo-answers", EDITION))
    )
    assert chatty_rows["raw_response"].str.starts_with("A (got Authorization: ***; verbatim=***;").all()
    assert chatty_rows["answer_strict"].is_null().all() and (chatty_rows["answer_lenient"] == "A").all()
    assert chatty_rows["response_provider"].str.contains("***", literal=True).all()
    logged = read_log(cell_log_path(warehouse_dir / "responses", "acme/echo-answers", EDITION))
    assert len(logged) == 80 and all("***" in (r.cost_note or "") for r in logged)

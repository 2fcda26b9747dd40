"""The instance of docs/scaling.md's first yaml block, on a real PostgreSQL the test starts, used as a user would.

The block is copied as written into `$DAGSTER_HOME/dagster.yaml`, the server's address given in the
`DAGSTER_PG_*` variables it reads. Then, through the real `oabench` command and the real UI processes:
`oabench ingest`; `oabench run` of a model on two editions at once against a loopback model server (the
published replies replayed); the same run again, which sends nothing; `oabench status`; and a UI backfill of
another model's two cells, launched over GraphQL as the launch dialog does and started by `dagster-daemon`
from the run queue. The runs are then read back from PostgreSQL itself.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg2
import pytest

from oabench_pipeline.inference.response_log import cell_log_path, read_log
from oabench_pipeline.shared.partitions import cell_partition_key
from oabench_pipeline.warehouse import Warehouse
from oabench_pipeline_tests.conftest import REPO_ROOT
from oabench_pipeline_tests.inference.replay import TEST_KEY, TEST_KEY_ENV, published_replies
from oabench_pipeline_tests.inference.run_processes import wait_until
from oabench_pipeline_tests.pipeline_env import write_models_file
from oabench_pipeline_tests.servers.dagster_webserver import (
    ADD_PARTITION,
    BACKFILL_RUNS,
    LAUNCH_BACKFILL,
    RUNS_NOT_ENDED,
    TERMINAL,
    DagsterWebserver,
    dagster_daemon,
)
from oabench_pipeline_tests.servers.openai_replay import ReplayServer
from oabench_pipeline_tests.servers.postgres import (
    PostgresServer,
    postgres_bin_dir,
    restartable_postgres,
    running_postgres,
)

# Slow: a PostgreSQL server, `oabench` processes, the webserver and the daemon.
pytestmark = pytest.mark.slow

OABENCH = Path(sys.executable).with_name("oabench")
EDITIONS = ("43", "44")
ACTIVE_QUESTIONS = 78 + 80  # the 43rd annulled 2 of its 80
BY_COMMAND = "deepseek/deepseek-v3.2"  # cells run by `oabench run`
BY_BACKFILL = "x-ai/grok-4.1-fast"  # cells run by a UI backfill through the daemon
BACKFILL_TIMEOUT_S = 240.0


def documented_instance_yaml() -> str:
    """docs/scaling.md's first yaml block, as a user copies it."""
    text = (REPO_ROOT / "docs" / "scaling.md").read_text(encoding="utf-8")
    match = re.search(r"```yaml\n(.*?)```", text, re.DOTALL)
    assert match, "docs/scaling.md has no yaml block"
    return match.group(1)


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    if postgres_bin_dir() is None:
        message = "no PostgreSQL (apt-get install postgresql); .ci/run installs it"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {message}")
        pytest.skip(message)
    with running_postgres(tmp_path_factory.mktemp("postgres")) as server:
        yield server


def oabench(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(OABENCH), *args], env=env, capture_output=True, text=True, timeout=600, cwd=REPO_ROOT
    )


def test_the_documented_postgres_instance_runs_every_path(
    postgres: PostgresServer, tmp_path: Path, shared_oab: Path
) -> None:
    env, warehouse_path = _postgres_env(tmp_path, postgres, shared_oab)
    home = Path(env["DAGSTER_HOME"])

    ingest = oabench(env, "ingest", "--editions", ",".join(EDITIONS))
    assert ingest.returncode == 0, ingest.stdout + ingest.stderr

    replies = published_replies(shared_oab, Warehouse(warehouse_path))
    with ReplayServer(replies=replies, api_key=TEST_KEY) as server:
        entries = [
            {"id": key, "base_url": server.base_url, "api_key_env": TEST_KEY_ENV}
            for key in (BY_COMMAND, BY_BACKFILL)
        ]
        env["OABENCH_MODELS_FILE"] = str(write_models_file(tmp_path / "models.toml", entries))

        # Two cells at once on one instance: the pool and the runs' rows written together.
        run = oabench(env, "run", "--models", BY_COMMAND, "--editions", ",".join(EDITIONS))
        assert run.returncode == 0, run.stdout + run.stderr
        assert server.stats.total_requests == ACTIVE_QUESTIONS

        rerun = oabench(env, "run", "--models", BY_COMMAND, "--editions", ",".join(EDITIONS))
        assert rerun.returncode == 0, rerun.stdout + rerun.stderr
        assert server.stats.total_requests == ACTIVE_QUESTIONS  # nothing asked again

        status = oabench(env, "status", "--models", BY_COMMAND, "--editions", ",".join(EDITIONS))
        assert status.returncode == 0, status.stdout + status.stderr  # 0: every listed cell complete
        for edition in EDITIONS:
            row = rf"^{edition}\s+{re.escape(BY_COMMAND)}\s+complete\b"
            assert re.search(row, status.stdout, re.MULTILINE), status.stdout

        backfill_runs = ui_backfill(home, env, BY_BACKFILL)
        assert [r["status"] for r in backfill_runs] == ["SUCCESS"] * len(EDITIONS), backfill_runs
        assert server.stats.total_requests == 2 * ACTIVE_QUESTIONS
        assert not server.stats.duplicate_answers

    answered = Warehouse(warehouse_path).query(
        "select model_key, count(*) as n from inferences where not skipped and error is null group by 1 order by 1"
    )
    assert answered.rows() == [(BY_COMMAND, ACTIVE_QUESTIONS), (BY_BACKFILL, ACTIVE_QUESTIONS)]
    with _connect(postgres) as connection, connection.cursor() as cursor:
        cursor.execute("select pipeline_name, status from runs")
        runs = cursor.fetchall()
    # ingest, two cells, table rebuilds, the backfill's runs, the models table refreshed by the daemon's sensor
    unsuccessful = [(job, status) for job, status in runs if status != "SUCCESS"]
    assert not unsuccessful, unsuccessful
    assert len(runs) >= 1 + len(EDITIONS) * 2


def ui_backfill(home: Path, env: dict[str, str], model_key: str) -> list[dict]:
    """The model's cells of EDITIONS as a UI backfill; its runs once all have ended."""
    with DagsterWebserver(home, env) as web, dagster_daemon(home, env):
        added = web.query(ADD_PARTITION, {"repo": web.repository_selector(), "key": model_key})
        assert added["addDynamicPartition"]["__typename"] == "AddDynamicPartitionSuccess", added
        params = {
            "partitionNames": [str(cell_partition_key(model_key, e)) for e in EDITIONS],
            "assetSelection": [{"path": ["inferences"]}, {"path": ["scores"]}],
            "fromFailure": False,
            "tags": [],
        }
        launched = web.query(LAUNCH_BACKFILL, {"params": params})["launchPartitionBackfill"]
        assert launched["__typename"] == "LaunchBackfillSuccess", launched
        deadline = time.monotonic() + BACKFILL_TIMEOUT_S
        runs: list[dict] = []
        while time.monotonic() < deadline:
            runs = web.query(BACKFILL_RUNS, {"id": launched["backfillId"]})["runsOrError"]["results"]
            # Done when the backfill's runs have ended and so has every other run the daemon started (the
            # models registry sensor's first tick refreshes the models table): stopping the daemon then
            # interrupts nothing.
            backfill_ended = len(runs) >= len(EDITIONS) and all(r["status"] in TERMINAL for r in runs)
            if backfill_ended and not web.query(RUNS_NOT_ENDED)["runsOrError"]["results"]:
                return runs
            time.sleep(0.5)
        daemon_log = (home / "daemon.log").read_text(errors="replace")[-3000:]
        raise AssertionError(f"backfill not done after {BACKFILL_TIMEOUT_S} s: {runs}\n{daemon_log}")


RESTART_MODEL = "acme/pg-restart"
RESTART_EDITION = "45"  # 80 questions, none annulled
IN_FLIGHT = 4  # the model's concurrency
DOWN_S = 20.0  # how long PostgreSQL stays down once the cell has every reply


def test_postgresql_restarted_mid_run_loses_no_paid_reply_and_the_rerun_pays_nothing_twice(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, shared_oab: Path
) -> None:
    """Issue 41's case on a real server: PostgreSQL goes down while a cell's replies arrive and comes back
    20 s after the last one. Every reply the model server answered is in the response log, the command ends
    without a traceback, and one rerun completes the cell asking nothing twice, no run left in progress."""
    if postgres_bin_dir() is None:
        message = "no PostgreSQL (apt-get install postgresql); .ci/run installs it"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {message}")
        pytest.skip(message)
    # A short folder: the server's Unix socket path must fit in 107 bytes (this test's own name would not).
    pg_root = tmp_path_factory.mktemp("pg")
    with (
        restartable_postgres(pg_root) as (postgres, process),
        ReplayServer(latency_s=0.01, api_key=TEST_KEY) as server,
    ):
        env, warehouse_path = _postgres_env(tmp_path, postgres, shared_oab)
        entry = {"id": RESTART_MODEL, "base_url": server.base_url, "api_key_env": TEST_KEY_ENV}
        entry["concurrency"] = IN_FLIGHT
        env["OABENCH_MODELS_FILE"] = str(write_models_file(tmp_path / "models.toml", [entry]))
        ingest = oabench(env, "ingest", "--editions", RESTART_EDITION)
        assert ingest.returncode == 0, ingest.stdout + ingest.stderr

        server.hold_replies(allow=20)
        output = tmp_path / "run.out"
        with output.open("wb") as out:
            run = subprocess.Popen(
                [str(OABENCH), "run", "--models", RESTART_MODEL, "--editions", RESTART_EDITION],
                env=env,
                cwd=REPO_ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            wait_until(lambda: server.stats.total_requests >= 20 + IN_FLIGHT, run, "20 answered, 4 held")
            process.stop()  # PostgreSQL down while the held replies and the rest of the cell arrive
            server.release_replies()
            wait_until(lambda: server.stats.total_requests >= 80, run, "every question asked")
            time.sleep(DOWN_S)
            process.start()
            code = run.wait(timeout=600)
        finally:
            if run.poll() is None:
                os.killpg(run.pid, 9)
                run.wait()
        text = output.read_text(errors="replace")
        log = cell_log_path(warehouse_path.parent / "responses", RESTART_MODEL, RESTART_EDITION)
        answered = sum(server.stats.answers_per_prompt.values())

        assert "Traceback" not in text, text[-4000:]
        assert "Retrying failed database" not in text, "dagster-postgres' retries, said once a minute"
        outage_lines = [line for line in text.splitlines() if "storage is unreachable" in line]
        assert 1 <= len(outage_lines) <= 2, text[-4000:]
        assert code in (0, 1), text[-4000:]
        assert answered == 80, "the cell went on sending while PostgreSQL was down"
        assert len(read_log(log)) == answered, "every reply the server answered is in the response log"

        rerun = oabench(env, "run", "--models", RESTART_MODEL, "--editions", RESTART_EDITION)
        assert rerun.returncode == 0, rerun.stdout + rerun.stderr
        assert server.stats.total_requests == 80 and max(server.stats.requests_per_prompt.values()) == 1
        assert Warehouse(warehouse_path).read("inferences", f"{RESTART_EDITION}|{RESTART_MODEL}").height == 80
        with _connect(postgres) as connection, connection.cursor() as cursor:
            cursor.execute("select status from runs where status in ('STARTING', 'STARTED', 'CANCELING')")
            assert cursor.fetchall() == [], "no run left in progress"


def _postgres_env(tmp_path: Path, postgres: PostgresServer, shared_oab: Path) -> tuple[dict[str, str], Path]:
    """docs/scaling.md's instance in `tmp_path/dagster_home` on `postgres`, a warehouse beside it, the
    mirror, and no automation (only the runs the test starts: no sensor's); and the warehouse's path."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(documented_instance_yaml(), encoding="utf-8")
    warehouse_path = tmp_path / "warehouse" / "oabench.duckdb"
    env = {
        **os.environ,
        **postgres.environment(),
        "DAGSTER_HOME": str(home),
        "OABENCH_WAREHOUSE": str(warehouse_path),
        "OABENCH_SOURCE_BASE_URL": str(shared_oab / "mirror"),
        "OABENCH_MODEL_BACKOFF_S": "0.01",
        "OABENCH_AUTOMATION": "off",
        TEST_KEY_ENV: TEST_KEY,
    }
    return env, warehouse_path


@contextmanager
def _connect(postgres: PostgresServer) -> Iterator[psycopg2.extensions.connection]:
    """A session on the test's server, closed at the end of the block (psycopg2's own `with` only ends the
    transaction: a session left open made the server's shutdown wait for it)."""
    connection = psycopg2.connect(
        host=postgres.host,
        port=postgres.port,
        user=postgres.user,
        password=postgres.password,
        dbname=postgres.db_name,
    )
    try:
        yield connection
    finally:
        connection.close()

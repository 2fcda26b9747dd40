"""A real PostgreSQL server from Debian's packages, started by the tests in a temporary folder.

`initdb` makes a fresh cluster in a folder of the test's, and `postgres` serves it on 127.0.0.1 at a free
port, with its socket in that folder too: nothing of the machine's own PostgreSQL (its clusters, its port
5432, `/var/run/postgresql`) is used. PostgreSQL refuses to run as root, so as root the cluster belongs to
the `postgres` user, which Debian's package creates, and the server runs as that user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from oabench_pipeline_tests.servers.dagster_webserver import free_port

START_TIMEOUT_S = 30.0
USER = "oabench"
PASSWORD = "not-a-secret-test-password"


def postgres_bin_dir() -> Path | None:
    """Debian's PostgreSQL binaries (`/usr/lib/postgresql/<major>/bin`, the newest major), or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if found:
        return found[-1].parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


@dataclass(frozen=True)
class PostgresServer:
    host: str
    port: int
    user: str
    password: str
    db_name: str

    def environment(self) -> dict[str, str]:
        """The variables docs/scaling.md's instance reads (`DAGSTER_PG_*`)."""
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_USER": self.user,
            "DAGSTER_PG_PASSWORD": self.password,
            "DAGSTER_PG_DB": self.db_name,
        }


@dataclass
class PostgresProcess:
    """The server's process: stopped and started again on the same cluster and port, as an administrator's
    restart (or a crash and its recovery) does to the clients of a real instance."""

    bin_dir: Path
    port: int
    command: list[str]
    run_as: pwd.struct_passwd | None
    log: Path
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        """PostgreSQL's "fast" shutdown (SIGINT): open sessions are cut at once, as in a restart."""
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=60)

    def start(self) -> None:
        self.process = _spawn(self.run_as, self.command, self.log)
        _wait_until_ready(self.bin_dir, self.port, self.process, self.log)

    def terminate(self) -> None:
        """The test is over: "fast" shutdown (SIGINT), which ends open sessions at once. SIGTERM's "smart"
        shutdown waits for every client to disconnect, and a session the test or an orphaned child still
        holds kept it waiting the full timeout before the kill."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)  # its children end with it
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextmanager
def running_postgres(root: Path, db_name: str = "dagster") -> Iterator[PostgresServer]:
    """A PostgreSQL server for the duration of the block, its cluster under `root`; stopped and removed after."""
    with restartable_postgres(root, db_name) as (server, _):
        yield server


@contextmanager
def restartable_postgres(
    root: Path, db_name: str = "dagster"
) -> Iterator[tuple[PostgresServer, PostgresProcess]]:
    """`running_postgres`, with the server's process to stop and start again mid-test."""
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL is not installed (Debian: apt-get install postgresql)")
    data, sockets = root / "pgdata", root / "pgsocket"
    run_as = _unprivileged_user(root)
    password_file = root / "pgpass.txt"
    password_file.write_text(PASSWORD + "\n", encoding="utf-8")
    for path in (data, sockets):
        path.mkdir(mode=0o700)
    if run_as is not None:
        for path in (root, data, sockets, password_file):
            os.chown(path, run_as.pw_uid, run_as.pw_gid)
    _run(
        run_as,
        [
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            USER,
            "--pwfile",
            str(password_file),
            "-A",
            "scram-sha-256",
        ],
    )
    port = free_port()
    command = [
        str(bin_dir / "postgres"),
        "-D",
        str(data),
        "-p",
        str(port),
        "-h",
        "127.0.0.1",
        "-k",
        str(sockets),
    ]
    log = root / "postgres.log"
    server = PostgresProcess(bin_dir, port, command, run_as, log, _spawn(run_as, command, log))
    try:
        _wait_until_ready(bin_dir, port, server.process, log)
        env = {**os.environ, "PGPASSWORD": PASSWORD}
        subprocess.run(
            [str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", USER, db_name],
            env=env,
            check=True,
            capture_output=True,
            timeout=START_TIMEOUT_S,
        )
        yield PostgresServer("127.0.0.1", port, USER, PASSWORD, db_name), server
    finally:
        server.terminate()


def _unprivileged_user(root: Path) -> pwd.struct_passwd | None:
    """As root, the `postgres` user (PostgreSQL will not run as root); otherwise None (run as ourselves)."""
    if os.geteuid() != 0:
        return None
    user = pwd.getpwnam("postgres")
    # The server reads its cluster under `root`: every folder above it must let that user through.
    for parent in [root, *root.parents]:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            os.chmod(parent, mode | 0o001)
    return user


def _preexec(run_as: pwd.struct_passwd | None):  # type: ignore[no-untyped-def]
    if run_as is None:
        return None

    def drop_privileges() -> None:
        os.setgid(run_as.pw_gid)
        os.setuid(run_as.pw_uid)

    return drop_privileges


def _run(run_as: pwd.struct_passwd | None, command: list[str]) -> None:
    subprocess.run(
        command, preexec_fn=_preexec(run_as), check=True, capture_output=True, timeout=120, cwd="/"
    )


def _spawn(run_as: pwd.struct_passwd | None, command: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        if run_as is not None:
            os.chown(log, run_as.pw_uid, run_as.pw_gid)
        return subprocess.Popen(command, preexec_fn=_preexec(run_as), stdout=out, stderr=out, cwd="/")


def _wait_until_ready(bin_dir: Path, port: int, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(
                f"PostgreSQL exited ({server.returncode}): {log.read_text(errors='replace')[-2000:]}"
            )
        ready = subprocess.run(
            [str(bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)], capture_output=True, timeout=10
        )
        if ready.returncode == 0:
            return
        time.sleep(0.2)
    raise RuntimeError(f"PostgreSQL did not accept connections within {START_TIMEOUT_S:.0f} s")

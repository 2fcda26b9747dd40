"""A real `dagster-webserver` process on 127.0.0.1 for one DAGSTER_HOME, and a tiny GraphQL client for it.

Used by the UI test and by `scripts/screenshots.py`. The instance gets a `dagster.yaml` with the
`DefaultRunCoordinator`, so a run launched from the UI starts at once (Dagster's default, the
`QueuedRunCoordinator`, waits for `dagster-daemon`, which `dagster dev` starts beside the webserver).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
WEBSERVER_BIN = Path(sys.executable).with_name("dagster-webserver")
# How often startup is probed (a GraphQL query: it says nothing before the code location is loaded).
POLL_S = 0.1

INSTANCE_YAML = """\
# A throwaway instance for the UI: local SQLite storage, runs start at once, no telemetry, no
# "join the community" dialog on first visit.
run_coordinator:
  module: dagster.core.run_coordinator
  class: DefaultRunCoordinator
telemetry:
  enabled: false
nux:
  enabled: false
"""

LOCATION_QUERY = """
{ workspaceOrError { __typename ... on Workspace { locationEntries { name
    locationOrLoadError { __typename ... on PythonError { message }
      ... on RepositoryLocation { repositories { name } } } } } } }
"""


def free_port() -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_instance_yaml(dagster_home: Path) -> None:
    """Create `dagster_home` with the UI instance config (kept if a `dagster.yaml` is already there)."""
    dagster_home.mkdir(parents=True, exist_ok=True)
    config = dagster_home / "dagster.yaml"
    if not config.exists():
        config.write_text(INSTANCE_YAML, encoding="utf-8")


class GraphQLError(RuntimeError):
    """The server answered with GraphQL errors, or not at all."""


@dataclass
class DagsterWebserver:
    """`dagster-webserver -w workspace.yaml` from the repo root, as a context manager.

    `env` is added to this process's environment (and passed on to the code server and run workers).
    On exit the whole process group is terminated, then killed if it does not stop within 10 s.
    """

    dagster_home: Path
    env: Mapping[str, str] = field(default_factory=dict)
    port: int = 0
    log_path: Path | None = None
    startup_timeout_s: float = 120.0
    location: str = ""
    repository: str = ""
    _process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> DagsterWebserver:
        if not WEBSERVER_BIN.exists():
            raise FileNotFoundError(
                f"{WEBSERVER_BIN} not found: install the project with pip install -e '.[dev]'"
            )
        write_instance_yaml(self.dagster_home)
        self.port = self.port or free_port()
        self.log_path = self.log_path or self.dagster_home / "webserver.log"
        env = {**os.environ, **self.env, "DAGSTER_HOME": str(self.dagster_home)}
        command = [str(WEBSERVER_BIN), "-h", "127.0.0.1", "-p", str(self.port), "-w", "workspace.yaml"]
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            self._wait_until_loaded()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Terminate the webserver and its children (code server, run workers): they share its session."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                process.wait(timeout=wait_s)
                return
            except subprocess.TimeoutExpired:
                continue

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the server's output, for failure messages."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-chars:]

    def _wait_until_loaded(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        last = ""
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"dagster-webserver exited with {self._process.returncode}:\n{self.log_tail()}"
                )
            try:
                workspace = self.query(LOCATION_QUERY)["workspaceOrError"]
            except (GraphQLError, OSError) as error:
                last = str(error)
                time.sleep(POLL_S)
                continue
            entries = workspace.get("locationEntries") or []
            loaded = [
                e
                for e in entries
                if (e["locationOrLoadError"] or {}).get("__typename") == "RepositoryLocation"
            ]
            failed = [
                e for e in entries if (e["locationOrLoadError"] or {}).get("__typename") == "PythonError"
            ]
            if failed:
                raise RuntimeError(
                    f"code location failed to load: {failed[0]['locationOrLoadError']['message']}"
                )
            if loaded:
                self.location = loaded[0]["name"]
                self.repository = loaded[0]["locationOrLoadError"]["repositories"][0]["name"]
                return
            last = json.dumps(workspace)[:500]
            time.sleep(POLL_S)
        raise TimeoutError(
            f"dagster-webserver not ready after {self.startup_timeout_s} s ({last}):\n{self.log_tail()}"
        )

    def query(self, text: str, variables: Mapping[str, Any] | None = None, timeout_s: float = 30.0) -> dict:
        """POST a GraphQL query or mutation to `/graphql`; returns `data`, raises on `errors`."""
        body = json.dumps({"query": text, "variables": dict(variables or {})}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                payload = json.loads(response.read())
        except urllib.error.HTTPError as error:
            raise GraphQLError(f"HTTP {error.code}: {error.read()[:500]!r}") from None
        if payload.get("errors"):
            raise GraphQLError(json.dumps(payload["errors"])[:2000])
        return payload["data"]

    def repository_selector(self) -> dict[str, str]:
        return {"repositoryLocationName": self.location, "repositoryName": self.repository}


# A UI backfill as the launch dialog sends it (`benchmarks/matrix.py`, the Postgres instance's test).
ADD_PARTITION = """
mutation Add($repo: RepositorySelector!, $key: String!) {
  addDynamicPartition(repositorySelector: $repo, partitionsDefName: "model_keys", partitionKey: $key) {
    __typename ... on Error { message }
  }
}
"""
LAUNCH_BACKFILL = """
mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename ... on LaunchBackfillSuccess { backfillId } ... on Error { message }
  }
}
"""
BACKFILL_RUNS = """
query Runs($id: String!) {
  runsOrError(filter: {tags: [{key: "dagster/backfill", value: $id}]}) {
    ... on Runs { results { runId status startTime endTime } }
  }
}
"""
TERMINAL = {"SUCCESS", "FAILURE", "CANCELED"}
RUNS_NOT_ENDED = """
query RunsNotEnded {
  runsOrError(filter: {statuses: [QUEUED, NOT_STARTED, STARTING, STARTED, CANCELING]}) {
    ... on Runs { results { runId jobName status } }
  }
}
"""


@contextmanager
def dagster_daemon(dagster_home: Path, env: dict[str, str]) -> Iterator[None]:
    """`dagster-daemon run` (run queue, backfills) over the webserver's instance, stopped with its children."""
    with (dagster_home / "daemon.log").open("wb") as log:
        process = subprocess.Popen(
            [str(WEBSERVER_BIN.with_name("dagster-daemon")), "run", "-w", "workspace.yaml"],
            cwd=REPO_ROOT,
            env={**env, "DAGSTER_HOME": str(dagster_home)},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)

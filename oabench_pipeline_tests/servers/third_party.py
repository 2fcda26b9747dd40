"""Servers nobody here wrote, started for real on 127.0.0.1: LLMock (an OpenAI-compatible mock server)
and proxy.py (a forward HTTP proxy), both installed from PyPI with the dev extras.

Each runs as its own process, so the client meets exactly what a user's machine would; the fixtures
stop them (SIGTERM, then SIGKILL) when the test ends.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _bin(name: str) -> str:
    """The console script installed beside this interpreter (the venv's), else on PATH."""
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.exists() else name


class ExternalServer:
    """A server process listening on 127.0.0.1:`port`; its output goes to `log_path`."""

    def __init__(self, argv: list[str], port: int, log_path: Path) -> None:
        self.argv, self.port, self.log_path = argv, port, log_path
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ExternalServer:
        env = {
            k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")
        }
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"{self.argv[0]} exited at start: {self.log_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.__exit__()
        raise RuntimeError(f"{self.argv[0]} did not listen on port {self.port} within {START_TIMEOUT_S} s")

    def __exit__(self, *exc: object) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)
        self._process = None

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


class LLMock(ExternalServer):
    """`llmock serve`: answers every chat completion with a fixed text; faults are queued over HTTP."""

    def __init__(self, folder: Path) -> None:
        port = free_port()
        argv = [_bin("llmock"), "serve", "--host", "127.0.0.1", "--port", str(port)]
        argv += ["--response-style", "static", "--tool-mode", "off", "--log-level", "warning"]
        super().__init__(argv, port, folder / "llmock.log")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def admin(self, path: str, payload: dict[str, Any] | None = None) -> Any:
        """LLMock's own admin API (`/_llmock/...`), which bypasses its chaos."""
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/_llmock/{path}", data=data)
        with urllib.request.urlopen(request, timeout=10) as response:  # loopback only
            return json.loads(response.read())


class ForwardProxy(ExternalServer):
    """proxy.py as a plain forward proxy; each request it relays is a line of its access log."""

    def __init__(self, folder: Path) -> None:
        port = free_port()
        argv = [_bin("proxy"), "--hostname", "127.0.0.1", "--port", str(port)]
        argv += ["--num-workers", "1", "--num-acceptors", "1"]
        super().__init__(argv, port, folder / "proxy.log")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def relayed(self, needle: str) -> int:
        """How many access-log lines mention `needle` (e.g. "POST 127.0.0.1:PORT/v1/chat/completions")."""
        return sum(needle in line for line in self.log_text().splitlines())

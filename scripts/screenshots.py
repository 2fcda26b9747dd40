"""Screenshots of the Dagster UI for the docs: the global asset lineage and the leaderboard_report page.

    .venv/bin/python scripts/screenshots.py [--out docs/images] [--work DIR] [--skip-prepare]

Prepares a warehouse and a Dagster instance in `--work` (a temporary folder by default) the way a person
does, with the `oabench` CLI: ingest the three editions from the mirror beside the repo
(`../shared/oab/mirror`), run the two offline baselines, import the published OABench runs (so the
leaderboard has real rows). Then it starts `dagster-webserver` on 127.0.0.1 for that instance and has
headless Chromium (Debian: `apt-get install chromium`) save PNGs of two pages into `--out`.
Nothing is sent off the machine: no API key is needed and the webserver's telemetry is off.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from oabench_pipeline_tests.servers.dagster_webserver import (  # noqa: E402
    DagsterWebserver,
    free_port,
    write_instance_yaml,
)

SHARED = Path(os.environ.get("OABENCH_SHARED_DIR", REPO_ROOT.parent / "shared")) / "oab"
OABENCH = Path(sys.executable).with_name("oabench")
BASELINES = "baseline/random,baseline/longest-choice"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WIDTH, HEIGHT = 1600, 1000

# (file name, page path, milliseconds of virtual time the React app gets to fetch and draw)
GROUPS = ("sources", "exams", "inference", "scoring", "reports")
PAGES = (
    # The global lineage with every group expanded (the UI's `expanded` query parameter).
    ("asset-graph.png", "/asset-groups?expanded=" + ",".join(f"global@global:{g}" for g in GROUPS), 25_000),
    # The latest materialization of the report: its metadata (the leaderboard as Markdown, two charts).
    ("leaderboard-report.png", "/assets/leaderboard_report?view=events", 25_000),
)
# With the `websockets` package (installed with dagster-webserver's uvicorn), the report page is taken
# through the DevTools protocol after clicking the leaderboard's "[Show Markdown]", so the table shows.
CLICK_ON = {"leaderboard-report.png": "[Show Markdown]"}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "images", help="where the PNGs go")
    parser.add_argument(
        "--work", type=Path, help="warehouse + DAGSTER_HOME folder (default: a temporary one)"
    )
    parser.add_argument("--skip-prepare", action="store_true", help="reuse the warehouse already in --work")
    args = parser.parse_args()

    chromium = find_chromium()
    if chromium is None:
        print(
            "no Chromium found: apt-get install chromium (Debian/Ubuntu), then run this again",
            file=sys.stderr,
        )
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="oabench-screens-"))
    env = {
        "OABENCH_WAREHOUSE": str(work / "warehouse" / "oabench.duckdb"),
        "DAGSTER_HOME": str(work / "dagster_home"),
        "OABENCH_SOURCE_BASE_URL": str(SHARED / "mirror"),
        "OABENCH_LOG_LEVEL": "ERROR",
    }
    if not args.skip_prepare:
        write_instance_yaml(work / "dagster_home")  # before the CLI writes its own
        prepare(env)
    args.out.mkdir(parents=True, exist_ok=True)
    with DagsterWebserver(work / "dagster_home", env) as server:
        print(f"webserver: {server.url} (log: {server.log_path})")
        for name, path, budget_ms in PAGES:
            target = args.out / name
            url, profile = f"{server.url}{path}", work / "chromium-profile"
            if name in CLICK_ON and has_websockets():
                screenshot_after_click(chromium, url, target, CLICK_ON[name], profile)
            else:
                screenshot(chromium, url, target, budget_ms, profile)
            print(f"{target}: {target.stat().st_size // 1024} KB")
    return 0


def find_chromium() -> str | None:
    """The first Chromium-family browser on PATH (`$CHROMIUM` wins)."""
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"]
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


def prepare(env: dict[str, str]) -> None:
    """Ingest, run the baselines and import the published runs with the `oabench` CLI."""
    steps = [
        ["ingest"],
        ["run", "--models", BASELINES],
        ["import", str(SHARED / "published-runs")],
    ]
    for step in steps:
        print("$ oabench " + " ".join(step), flush=True)
        subprocess.run([str(OABENCH), *step], cwd=REPO_ROOT, env={**os.environ, **env}, check=True)


def chromium_flags(chromium: str, profile: Path) -> list[str]:
    """Headless, sandbox-less (containers), no background traffic, a fresh profile, a 1600x1000 window."""
    profile.mkdir(parents=True, exist_ok=True)
    return [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--window-size={WIDTH},{HEIGHT}",
    ]


def screenshot(chromium: str, url: str, target: Path, budget_ms: int, profile: Path) -> None:
    """Load `url` in headless Chromium and save a PNG once `budget_ms` of virtual time has passed."""
    command = [
        *chromium_flags(chromium, profile),
        f"--virtual-time-budget={budget_ms}",
        f"--screenshot={target}",
        url,
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=180)
    if not target.is_file():
        raise RuntimeError(f"Chromium wrote no screenshot of {url}")


def has_websockets() -> bool:
    try:
        import websockets.sync.client  # noqa: F401
    except ImportError:
        return False
    return True


def screenshot_after_click(chromium: str, url: str, target: Path, text: str, profile: Path) -> None:
    """Open `url`, wait until an element reading `text` appears, click the first one, save a PNG.

    Drives Chromium over the DevTools protocol on a loopback port (no extra browser tooling needed).
    """
    from websockets.sync.client import connect

    port = free_port()
    browser = subprocess.Popen(
        [*chromium_flags(chromium, profile), f"--remote-debugging-port={port}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        page = _wait_for(lambda: _page_socket_url(port), "the DevTools endpoint", 60)
        with connect(page, max_size=None, open_timeout=30) as socket:
            session = _DevTools(socket)
            session.call("Page.navigate", url=url)
            session.call(
                "Emulation.setDeviceMetricsOverride",
                width=WIDTH,
                height=HEIGHT,
                deviceScaleFactor=1,
                mobile=False,
            )
            # the innermost element reading `text` (its ancestors read the same)
            find = (
                "[...document.querySelectorAll('*')].filter(e => e.innerText === "
                f"{text!r} && ![...e.children].some(c => c.innerText === {text!r}))[0]"
            )
            _wait_for(lambda: session.evaluate(f"!!({find})"), f"{text!r} on {url}", 90)
            session.evaluate(f"({find}).click()")
            time.sleep(3)  # the dialog opens and renders the Markdown and images
            shot = session.call("Page.captureScreenshot", format="png")
        target.write_bytes(base64.b64decode(shot["data"]))
    finally:
        browser.terminate()
        try:
            browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            browser.kill()
            browser.wait()


class _DevTools:
    """Minimal request/response over one DevTools page socket (events are read and dropped)."""

    def __init__(self, socket: object) -> None:
        self.socket = socket
        self.next_id = 0

    def call(self, method: str, **params: object) -> dict:
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=120))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression: str) -> object:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")


def _page_socket_url(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as response:
            targets = json.loads(response.read())
    except OSError:
        return None
    pages = [t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page"]
    return pages[0] if pages else None


def _wait_for(probe: Callable[[], object], what: str, timeout_s: float) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.5)
    raise TimeoutError(f"waited {timeout_s} s for {what}")


if __name__ == "__main__":
    sys.exit(main())

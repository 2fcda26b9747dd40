"""Headless Chromium driven over the DevTools protocol on loopback: the browser test and the screenshots.

No browser tooling beyond Debian's `chromium` and the `websockets` package: one page, navigate, wait for
text, click, evaluate JavaScript, capture a PNG. Everything runs on 127.0.0.1 with a fresh profile and
Chromium's background traffic turned off.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from oabench_pipeline_tests.servers.dagster_webserver import free_port

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WIDTH, HEIGHT = 1600, 1000


def find_chromium() -> str | None:
    """The first Chromium-family browser on PATH (`$CHROMIUM` wins)."""
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"]
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


def chromium_flags(chromium: str, profile: Path) -> list[str]:
    """Headless, sandbox-less (containers), no background traffic, a fresh profile, a 1600x1000 window."""
    profile.mkdir(parents=True, exist_ok=True)
    return [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--window-size={WIDTH},{HEIGHT}",
    ]


def wait_for(probe: Callable[[], object], what: str, timeout_s: float) -> Any:
    """Poll `probe` (every 50 ms) until it returns something truthy; for what cannot be awaited."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(f"waited {timeout_s} s for {what}")


# JavaScript: a promise of `probe()`'s first truthy value, checked at once and then after each change of the
# page (a MutationObserver, at most every 25 ms), or of null after `timeoutMs`.
WAIT_JS = """
((probe, timeoutMs) => new Promise(resolve => {
  const check = () => { try { return probe(); } catch (e) { return null; } };
  const first = check();
  if (first) { resolve(first); return; }
  let scheduled = false;
  const observer = new MutationObserver(() => {
    if (scheduled) return;
    scheduled = true;
    setTimeout(() => { scheduled = false; const value = check(); if (value) finish(value); }, 25);
  });
  const timer = setTimeout(() => finish(null), timeoutMs);
  function finish(value) { observer.disconnect(); clearTimeout(timer); resolve(value); }
  observer.observe(document, {childList: true, subtree: true, characterData: true, attributes: true});
}))
"""


class Browser:
    """One headless Chromium page, as a context manager. `profile` must be a fresh, private folder."""

    def __init__(self, chromium: str, profile: Path) -> None:
        self.chromium = chromium
        self.profile = profile
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: Any = None
        self._next_id = 0

    def __enter__(self) -> Browser:
        from websockets.sync.client import connect

        port = free_port()
        self._process = subprocess.Popen(
            [*chromium_flags(self.chromium, self.profile), f"--remote-debugging-port={port}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            page = wait_for(lambda: _page_socket_url(port), "Chromium's DevTools endpoint", 60)
            self._socket = connect(page, max_size=None, open_timeout=30)
            self.call(
                "Emulation.setDeviceMetricsOverride",
                width=WIDTH,
                height=HEIGHT,
                deviceScaleFactor=1,
                mobile=False,
            )
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        process, self._process = self._process, None
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def call(self, method: str, **params: object) -> dict:
        """One DevTools command and its result (events arriving meanwhile are read and dropped)."""
        self._next_id += 1
        self._socket.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv(timeout=120))
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:200]}: {result['exceptionDetails'].get('text')}")
        return result.get("result", {}).get("value")

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def text(self) -> str:
        """Everything the page shows as text right now."""
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def wait_until(self, probe: str, what: str, timeout_s: float = 90) -> Any:
        """The first truthy value of the JavaScript expression `probe` (a JSON value, not a DOM node),
        evaluated whenever the page changes (not on a timer); a navigation meanwhile is waited through (the
        wait goes on in the new page)."""
        deadline = time.monotonic() + timeout_s
        last_error = ""
        while (left := deadline - time.monotonic()) > 0:
            chunk_ms = int(min(left, 5.0) * 1000)
            try:
                value = self.evaluate(f"{WAIT_JS}(() => ({probe}), {chunk_ms})")
            except RuntimeError as error:  # the page navigated while waiting ("context destroyed")
                last_error = str(error)
                time.sleep(0.05)
                continue
            if value:
                return value
        raise TimeoutError(f"waited {timeout_s} s for {what} {last_error}".rstrip())

    def wait_for_text(self, *texts: str, timeout_s: float = 90) -> str:
        """Wait until the page shows every one of `texts`; returns the page text."""
        shown = "(document.body ? document.body.innerText : '')"
        probe = f"{json.dumps(list(texts))}.every(t => {shown}.includes(t)) ? {shown} : null"
        try:
            return self.wait_until(probe, f"{texts}", timeout_s)
        except TimeoutError:
            page = self.text()
            missing = [t for t in texts if t not in page]
            raise TimeoutError(f"page never showed {missing}; it shows:\n{page[:3000]}") from None

    def click_text(self, text: str, index: int = 0) -> None:
        """Click the `index`-th innermost element whose text is exactly `text`."""
        self.evaluate(f"({_innermost(text)})[{index}].click()")

    def count_text(self, text: str) -> int:
        return self.evaluate(f"({_innermost(text)}).length") or 0

    def screenshot(self, target: Path) -> None:
        shot = self.call("Page.captureScreenshot", format="png")
        target.write_bytes(base64.b64decode(shot["data"]))


def _innermost(text: str) -> str:
    """JavaScript: the elements reading exactly `text` whose children do not (their ancestors read it too)."""
    literal = json.dumps(text)
    return (
        f"[...document.querySelectorAll('*')].filter(e => e.innerText === {literal} "
        f"&& ![...e.children].some(c => c.innerText === {literal}))"
    )


# JavaScript: every <img> of the page (or of the open dialog) with whether it loaded and its drawn size.
IMAGES_JS = """
(async (scope) => {
  const root = scope ? document.querySelector(scope) : document;
  const images = [...(root ? root.querySelectorAll('img') : [])];
  await Promise.all(images.map(i => i.complete ? null : new Promise(r => { i.onload = r; i.onerror = r; })));
  return images.map(i => ({src: i.src.slice(0, 30), loaded: i.complete && i.naturalWidth > 0,
    width: i.naturalWidth, shown: i.getBoundingClientRect().width,
    inView: i.getBoundingClientRect().right <= window.innerWidth + 1}));
})
"""


def images(browser: Browser, scope: str | None = None) -> list[dict]:
    """Every image of the page (or inside the CSS selector `scope`): loaded, natural and drawn width."""
    return browser.evaluate(f"{IMAGES_JS}({json.dumps(scope)})") or []


def _page_socket_url(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as response:
            targets = json.loads(response.read())
    except OSError:
        return None
    pages = [t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page"]
    return pages[0] if pages else None

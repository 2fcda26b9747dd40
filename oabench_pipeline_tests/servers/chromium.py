"""Headless Chromium driven by Playwright for Python: the browser tests and the screenshots.

Debian's `chromium` (`executable_path`: Playwright downloads no browser), a fresh profile per launch and
Chromium's background traffic turned off. `Browser` is one page with the few verbs the tests use: go to a
URL, wait for text or a JavaScript condition, click a text, capture a PNG, and every URL the page asked for.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WIDTH, HEIGHT = 1600, 1000
# Playwright adds --headless and its automation flags; these keep Chromium off the network on its own.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]


def find_chromium() -> str | None:
    """The first Chromium-family browser on PATH (`$CHROMIUM` wins)."""
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"]
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


class Browser:
    """One headless Chromium page, as a context manager; `requests` lists every URL the page asked for."""

    def __init__(self, chromium: str, width: int = WIDTH, height: int = HEIGHT) -> None:
        self.chromium = chromium
        self.viewport = {"width": width, "height": height}
        self.requests: list[str] = []
        self._playwright: Any = None
        self._browser: Any = None
        self.page: Any = None

    def __enter__(self) -> Browser:
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        try:
            self._browser = self._playwright.chromium.launch(
                executable_path=self.chromium, args=CHROMIUM_ARGS, headless=True
            )
            self.new_page()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._browser is not None:
            self._browser.close()
            self._browser = None
        if self._playwright is not None:
            self._playwright.stop()
            self._playwright = None

    def new_page(self) -> None:
        """A fresh page (and an empty `requests`): nothing a previous page still polls for is counted."""
        if self.page is not None:
            self.page.close()
        self.requests = []
        self.page = self._browser.new_page(viewport=self.viewport)
        self.page.on("request", lambda request: self.requests.append(request.url))

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        return self.page.evaluate(expression)

    def goto(self, url: str) -> None:
        self.page.goto(url, wait_until="load", timeout=120_000)

    def text(self) -> str:
        """Everything the page shows as text right now."""
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def wait_until(self, probe: str, what: str, timeout_s: float = 90) -> Any:
        """The first truthy value of the JavaScript expression `probe` (a JSON value, not a DOM node)."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        try:
            handle = self.page.wait_for_function(f"() => ({probe})", timeout=timeout_s * 1000, polling=100)
        except PlaywrightTimeout:
            raise TimeoutError(f"waited {timeout_s} s for {what}") from None
        return handle.json_value()

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

    def screenshot(self, target: Path, full_page: bool = False) -> None:
        self.page.screenshot(path=str(target), full_page=full_page)


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

"""Chromium signed in to a :mod:`jrs_testbench.ui_site`, and what went wrong in its tabs.

Shared by the browser tests: ``tests/airflow/test_ui_views_load.py`` (each view loads, on every
Airflow minor, with and without a base-URL sub-path) and ``tests/e2e/test_ui_browser.py`` (each
action). Debian's ``/usr/bin/chromium`` driven by Playwright's sync API: Playwright cannot
download its own browsers here (``./dev test`` installs Debian's package when it can).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jrs_testbench.ui_site import UiSite

CHROMIUM = "/usr/bin/chromium"
TIMEOUT_MS = 60_000  # generous: two shared cores
#: What Airflow's React plugin loader logs when a bundle cannot be imported or registers no
#: component (then it renders its 404 page): "Component Failed Loading:" in 3.1,
#: "Component failed to load:" in 3.2 and 3.3.
LOADER_FAILURE = re.compile(r"component failed (loading|to load)", re.IGNORECASE)


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or ``None`` when they can."""
    if not Path(CHROMIUM).is_file():
        return f"no Chromium at {CHROMIUM} (install Debian's chromium; browsers cannot be downloaded here)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed"
    return None


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium, closed on exit (check :func:`missing_browser` first). Playwright's
    ``expect`` waits up to :data:`TIMEOUT_MS` too (its default, 5 s, is short for a loaded machine)."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


class Tab:
    """A signed-in tab in its own context (light or dark), and what went wrong in it: page errors,
    the plugin loader's failures, and a 404 or a server error for a request under ``/jrs/`` (the
    bundle, its icons, its API; a refusal the page words, such as a 409, is no fault)."""

    def __init__(self, browser: Any, site: UiSite, scheme: str = "light") -> None:
        self.site = site
        self.context = browser.new_context(
            viewport={"width": 1280, "height": 900},
            color_scheme=scheme,
            permissions=["clipboard-read", "clipboard-write"],
        )
        self.context.set_default_timeout(TIMEOUT_MS)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("console", lambda m: self.errors.append(m.text) if LOADER_FAILURE.search(m.text) else None)
        self.page.on("response", self._on_response)
        self.sign_in()

    def _on_response(self, response: Any) -> None:
        if "/jrs/" in response.url and (response.status == 404 or response.status >= 500):
            self.errors.append(f"HTTP {response.status} for {response.url}")

    def sign_in(self) -> None:
        page, airflow = self.page, self.site.airflow
        page.goto(self.site.url + "/")
        page.wait_for_url("**/auth/login**")
        page.locator("input[name=username]").fill(airflow.username)
        page.locator("input[name=password]").fill(airflow.password)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(lambda u: "/auth/login" not in u)

    def open(self, path: str) -> Any:
        """``path`` below the site's URL (its base path included)."""
        self.page.goto(self.site.url + path)
        return self.page

    def close(self) -> None:
        self.context.close()


def luminance(css_color: str) -> float:
    """0 (black) to 1 (white) of a computed CSS color: ``rgb(...)`` or Chakra's ``oklch(L ...)``."""
    numbers = [float(x) for x in re.findall(r"[\d.]+", css_color)]
    if css_color.startswith("oklch"):
        return numbers[0] if numbers[0] <= 1 else numbers[0] / 100
    r, g, b = numbers[:3]
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255

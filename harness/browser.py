"""Headless Chromium for the page tests and the docs screenshot (Debian's ``chromium``).

Playwright drives the system browser (``executable_path``) because its own browser
download is not possible everywhere; ``make browser`` installs the Debian package.
"""

from __future__ import annotations

import shutil
from typing import Any

__all__ = ["CHROMIUM_ARGS", "chromium_path", "launch_chromium", "wait_until"]

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    """The system Chromium, or None when it is not installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def launch_chromium(playwright: Any) -> Any:
    """A Playwright ``Browser`` on the system Chromium (FileNotFoundError if there is none)."""
    path = chromium_path()
    if path is None:
        raise FileNotFoundError("chromium is not installed: run `make browser`")
    return playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS, headless=True)


def wait_until(page: Any, js_function: str, timeout: float = 20.0) -> Any:
    """Poll ``page.evaluate(js_function)`` until it is truthy; its value (TimeoutError if never).

    The page's Content-Security-Policy forbids ``eval``, which Playwright's
    ``wait_for_function`` relies on; ``evaluate`` is not affected.
    """
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = page.evaluate(js_function)
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout} s for {js_function!r} in the page")
        page.wait_for_timeout(50)

"""Headless Chromium for the browser tests: Debian's package (installed by `make test`), driven by Playwright; no
browser is downloaded."""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@contextmanager
def chromium_page(width: int = 1200, height: int = 900, init_script: str | None = None):
    """A page and the list its console errors and page errors go to."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is missing: `make test` installs it (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            if init_script:
                page.add_init_script(init_script)
            yield page, errors
        finally:
            browser.close()

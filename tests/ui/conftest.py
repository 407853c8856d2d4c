"""The browser for the UI tests: Debian's Chromium driven by Playwright, offline."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from django.db import connections

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Chromium's own background traffic is pointless offline and refused by closed networks.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def page(monkeypatch, tmp_path) -> Iterator[object]:
    if CHROMIUM is None:
        if os.environ.get("PORTAL_REQUIRE_BROWSER"):
            pytest.fail("Chromium is required here (PORTAL_REQUIRE_BROWSER) but not installed.")
        pytest.skip("Chromium is not installed (apt-get install chromium) — browser tests skipped.")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop in this thread; the ORM calls this test makes
    # around it are ordinary blocking calls, so Django's async guard does not apply.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        # Anything the Content-Security-Policy blocked (an inline script, a foreign source).
        refused: list[str] = []
        page.on(
            "console",
            lambda message: refused.append(message.text) if "Content Security Policy" in message.text else None,
        )
        yield page
        context.close()
        assert refused == [], refused
        browser.close()
        # ORM calls made while Playwright's loop runs get their own connection (Django keeps
        # connections per async context); close it here, or the test database cannot be dropped.
        connections.close_all()

"""A person in a real browser (Debian's Chromium driven by Playwright) against real daphne:
log in, create a collection, see it, switch to Chinese."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from django.db import connections

from knowledge.models import Collection
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True)]

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
        yield context.new_page()
        context.close()
        browser.close()
        # ORM calls made while Playwright's loop runs get their own connection (Django keeps
        # connections per async context); close it here, or the test database cannot be dropped.
        connections.close_all()


def test_it_logs_in_and_creates_a_collection(live_web, page, alice, tmp_path):
    base = f"http://127.0.0.1:{live_web}"
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=login]", "alice@example.com")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    assert page.locator("h1").inner_text() == "Collections"
    assert "No collections yet" in page.content()

    page.fill("input[name=name]", "季度报告 Q3")
    page.click("text=Create collection")
    page.wait_for_selector("h1:text('季度报告 Q3')")
    page.screenshot(path=str(tmp_path / "collection.png"))
    assert "Collection “季度报告 Q3” created." in page.inner_text(".messages")

    page.goto(f"{base}/")
    assert page.locator("table.list a", has_text="季度报告 Q3").count() == 1
    page.select_option("#language", "zh-hans")
    page.wait_for_selector("text=新建知识库")
    assert page.locator("h1").inner_text() == "知识库"
    page.screenshot(path=str(tmp_path / "dashboard-zh.png"))
    assert Collection.objects.get(name="季度报告 Q3").owner_user == alice


def test_it_shows_a_readable_error_for_a_wrong_password(live_web, page, alice):
    base = f"http://127.0.0.1:{live_web}"
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=login]", "alice@example.com")
    page.fill("input[name=password]", "wrong password")
    page.click("button[type=submit]")
    page.wait_for_selector(".errorlist")
    assert "not correct" in page.inner_text(".errorlist")
    assert page.url.startswith(f"{base}/accounts/login/")

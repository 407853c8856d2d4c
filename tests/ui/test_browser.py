"""A person in a real browser (Debian's Chromium driven by Playwright) against real daphne:
log in, create a collection, see it, switch to Chinese."""

from __future__ import annotations

import pytest

from knowledge.models import Collection
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True)]


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

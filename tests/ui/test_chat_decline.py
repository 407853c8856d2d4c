"""A question the documents do not answer, asked in the chat in a real browser (Chromium
through Playwright) against real daphne: the portal declines and lists the closest passages
as links, and a link opens its page with the passage marked. The portal declines before any
model work (the question names a year no passage holds), so the local model is never loaded."""

from __future__ import annotations

import re

import pytest

from tests.assistant.chat_files import files, ingest_files
from tests.ui.test_browser import log_in_as_alice

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("media")]


@pytest.fixture
def indexed(private_collection):
    """Alice's collection with the answering tests' files, indexed before the browser starts
    (its event loop would refuse the ingestion's synchronous Redis events)."""
    ingest_files(private_collection, files())
    return private_collection


def test_a_declined_answer_links_its_closest_passages_to_their_pages(indexed, live_web, page, alice):
    private_collection = indexed
    base = log_in_as_alice(page, live_web)
    page.goto(f"{base}/chat/")
    page.check(f'input[name=collections][value="{private_collection.pk}"]')
    page.fill("#question", "How many days of annual leave do we get in 2031?")
    page.click("#send")
    page.wait_for_selector("#send:not([disabled])", timeout=120_000)
    turn = page.locator(".answer-turn").last
    assert turn.locator(".answer").inner_text().startswith("The documents do not contain the answer.")
    assert turn.locator(".citations").is_hidden()
    links = turn.locator(".closest a")
    assert turn.locator(".closest").is_visible()
    assert 1 <= links.count() <= 3
    first = links.first
    assert "policy.pdf" in first.inner_text()
    href = first.get_attribute("href")
    found = re.fullmatch(r"/documents/(\d+)/pages/(\d+)/\?chunk=(\d+)", href or "")
    assert found, href
    first.click()
    page.wait_for_url(f"{base}{href}")
    marked = page.locator(f"#chunk-{found.group(3)}")
    assert "is-selected" in (marked.get_attribute("class") or "")
    assert marked.is_visible()

"""Every page of the portal in Debian's Chromium, on a 390×844 phone and a 1280×900 desktop,
in English and Chinese: nothing scrolls sideways, the console stays free of errors and every
image loads. A screenshot of each page at each size is kept under the test's tmp_path."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.stack import wait_for
from tests.ui.test_browser import log_in_as_alice

if TYPE_CHECKING:
    from playwright.sync_api import ConsoleMessage

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("media")]

MARKUP = ("**", "\\[", "No position on the page", "在页面上没有位置信息")
SIZES = {"phone": {"width": 390, "height": 844}, "desktop": {"width": 1280, "height": 900}}
# A page has settled once no request of its own has been in flight for QUIET seconds after its
# `load` event. Playwright's "networkidle" waits 0.5 s of quiet on every page, 96 pages here;
# what a page fetches after its load starts within a few milliseconds, so 0.1 s is ample.
QUIET = 0.1
SETTLE_TIMEOUT = 15.0

MARKDOWN = """# gzip

**gzip** \\[ **-acdfhlLnNrtvV19** \\] \\[ *name* ... \\]

Use `-9` or `--best` for the best compression. A long path that does not break by itself:
/usr/share/doc/gzip/examples/a-really-long-file-name-without-any-spaces-in-it-at-all.txt.gz
"""


def pages_of(alice) -> tuple[list[str], str]:
    """Every page a member of a team with a collection, a document, a conversation, a golden
    question and a source sees (paths), and the path of the Markdown document's page."""
    from assistant.models import Conversation, Message
    from ingestion.actions import do_add_document
    from knowledge.actions import do_create_collection, do_create_team
    from quality.models import GoldenQuestion
    from sources.actions import do_save_source
    from sources.models import Source
    from sources.remotes import Credentials
    from tests.ingestion.files import handbook_pdf
    from tests.ingestion.runs import drain

    team = do_create_team(alice, "Operations and infrastructure team with a long name")
    collection = do_create_collection(alice, "Manuals of the command-line tools we use every day", team=team)
    markdown, _run = do_add_document(collection, "gzip.md", MARKDOWN.encode(), enqueue=False)
    pdf, _run = do_add_document(
        collection, "handbook.pdf", handbook_pdf(Path(tempfile.mkdtemp()) / "h.pdf").read_bytes(), enqueue=False
    )
    drain(collection)
    conversation = Conversation.objects.create(user=alice, title="What does gzip -9 do, and how long does it take?")
    Message.objects.create(conversation=conversation, role="user", content=conversation.title)
    Message.objects.create(conversation=conversation, role="assistant", content="It compresses best [1].")
    GoldenQuestion.objects.create(
        collection=collection,
        key="gzip-best",
        question="What does gzip's -9 option do?",
        lang="en",
        kind="multihop",
        gold=[{"file": "gzip.md", "page": 1}],
        keys=["best"],
    )
    source = Source(collection=collection, name="Team share", kind=Source.Kind.WEBDAV)
    source.url = "https://dav.example.com/remote.php/dav/files/operations-and-infrastructure/manuals/"
    do_save_source(source, credentials=Credentials("dav-user", "dav-password-1"), actor=alice)
    c = collection.pk
    paths = [
        "/",
        f"/collections/{c}/",
        f"/collections/{c}/quality/",
        f"/collections/{c}/golden/",
        f"/collections/{c}/feedback/",
        f"/collections/{c}/analytics/",
        f"/collections/{c}/sources/",
        f"/collections/{c}/settings/",
        f"/documents/{markdown.pk}/",
        f"/documents/{markdown.pk}/pages/1/",
        f"/documents/{pdf.pk}/",
        f"/documents/{pdf.pk}/pages/1/",
        "/chat/",
        f"/chat/{conversation.pk}/",
        "/teams/",
        f"/teams/{team.pk}/",
        f"/teams/{team.pk}/analytics/",
        "/tokens/",
        "/memory/",
        "/feedback/",
        "/invitations/",
        "/audit/",
        "/accounts/email/",
        f"/sources/{source.pk}/",
    ]
    return paths, f"/documents/{markdown.pk}/pages/1/"


def test_every_page_fits_a_phone_and_a_desktop_in_both_languages(live_web, alice, tmp_path, monkeypatch):
    from django.db import connections

    from tests.ui.conftest import CHROMIUM, CHROMIUM_ARGS

    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt-get install chromium) — browser tests skipped.")
    from playwright.sync_api import sync_playwright

    paths, markdown_page = pages_of(alice)
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    base = f"http://127.0.0.1:{live_web}"
    problems: list[str] = []
    errors: list[str] = []  # the console's, cleared before each page
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for size, viewport in SIZES.items():
            for language in ("en", "zh-hans"):
                context = browser.new_context(viewport=viewport)  # type: ignore[arg-type]
                context.add_cookies([{"name": "django_language", "value": language, "url": base}])
                page = context.new_page()
                traffic = Traffic(page)
                page.on("console", lambda message: _error(message, errors))
                page.on("pageerror", lambda error: errors.append(str(error)))
                log_in_as_alice(page, live_web)
                chat_link = page.locator("#main-nav a[href='/chat/']")
                if size == "phone":  # the navigation folds behind its Menu button
                    assert not chat_link.is_visible()
                    page.click(".menu-toggle")
                assert chat_link.is_visible()
                for path in paths:
                    errors.clear()
                    problems += visit(page, f"{base}{path}", errors, traffic)
                    if path == markdown_page:  # read as text, not as markup
                        shown = page.inner_text("main")
                        problems += [f"{language} {path}: shows {m!r}" for m in MARKUP if m in shown]
                    name = f"{size}-{language}-{path.strip('/').replace('/', '-') or 'dashboard'}"
                    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
                context.close()
        browser.close()
    connections.close_all()
    assert problems == [], "\n".join(problems)


def _error(message: ConsoleMessage, errors: list[str]) -> None:
    if message.type == "error":
        errors.append(message.text)


class Traffic:
    """The requests a browser page has in flight, from its own events."""

    def __init__(self, page) -> None:
        self.page = page
        self.pending: set[object] = set()
        self.quiet_since: float | None = None
        page.on("request", lambda request: self.pending.add(request))
        page.on("requestfinished", lambda request: self.pending.discard(request))
        page.on("requestfailed", lambda request: self.pending.discard(request))

    def reset(self) -> None:
        """Before leaving for another page: the last one's requests are cut short."""
        self.pending.clear()
        self.quiet_since = None

    def settled(self) -> bool:
        """Whether the page has gone QUIET seconds without a request in flight; the browser's
        events are taken in while Playwright waits (so the check waits 20 ms itself)."""
        self.page.wait_for_timeout(20)
        now = time.monotonic()
        if self.pending:
            self.quiet_since = None
        elif self.quiet_since is None:
            self.quiet_since = now
        return self.quiet_since is not None and now - self.quiet_since >= QUIET


def visit(page, url: str, errors: list[str], traffic: Traffic) -> list[str]:
    """What is wrong with the page at `url` as this browser shows it."""
    from playwright.sync_api import Error

    traffic.reset()
    try:
        response = page.goto(url)
    except Error as exc:
        return [f"{url}: {exc.message}"]
    wait_for(traffic.settled, SETTLE_TIMEOUT, f"{url} without a request in flight for {QUIET} s", every=0)
    where = f"{page.viewport_size['width']} px {page.evaluate('document.documentElement.lang')} {url}"
    if response is None or response.status != 200:
        return [f"{where}: status {response.status if response else None}"]
    problems = []
    width, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    if width > inner:
        problems.append(f"{where}: {width} px wide at {inner} px; widest: {page.evaluate(WIDEST)}")
    broken = page.evaluate(BROKEN_IMAGES)
    if broken:
        problems.append(f"{where}: images not loaded {broken}")
    if errors:
        problems.append(f"{where}: console errors {errors}")
    return problems


# Images with an address that did not load (a dialog's empty <img> waiting for one is fine).
BROKEN_IMAGES = """[...document.images]
  .filter(i => i.getAttribute('src') && !(i.complete && i.naturalWidth)).map(i => i.src)"""

# The elements that stick out furthest past the viewport's right edge, to say what to fix.
WIDEST = """(() => {
  const out = [];
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    const name = el.tagName.toLowerCase() + (el.className ? '.' + String(el.className).split(' ')[0] : '');
    if (r.right > window.innerWidth + 1 && r.width > 0) out.push([Math.round(r.right), name]);
  }
  out.sort((a, b) => b[0] - a[0]);
  return out.slice(0, 4);
})()"""

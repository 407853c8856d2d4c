"""A person in a real browser (Debian's Chromium driven by Playwright) against real daphne:
log in, create a collection, see it, switch to Chinese."""

from __future__ import annotations

import pytest

from knowledge.models import Collection
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True)]


def test_it_logs_in_and_creates_a_collection(live_web, page, alice, tmp_path):
    base = log_in_as_alice(page, live_web)
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


MARKDOWN_ANSWER = """Two settings matter [1]:

1. `FIT_LIMIT` stops the fit **early** [1]
2. the lambda factor starts at 10 [1]

| setting | default |
|---|---|
| FIT_LIMIT | 1e-5 [1] |

```
set fit limit 1e-5
```

<img src=x onerror="document.title='owned'"> stays text."""


def test_a_stored_answer_shows_as_markdown_and_its_citation_highlights_the_quote(live_web, page, alice, tmp_path):
    """On reload (the same renderer draws streamed text): lists, a table, code and citation
    buttons; HTML the model wrote is text; the citation dialog marks the quoted span."""
    from tests.assistant.test_chat_page import make_conversation

    passage = "gnuplot can fit data. The default value of FIT_LIMIT is 1e-5. The lambda factor starts at 10."
    cited = {
        "n": 1,
        "inferred": False,
        "file": "gnuplot.pdf",
        "path": "gnuplot.pdf",
        "place": "page 9",
        "page": 9,
        "snippet": passage[:40],
        "text": passage,
        "quote": "The default value of FIT_LIMIT is 1e-5.",
        "location": {},
    }
    conversation = make_conversation(alice, "fit settings", MARKDOWN_ANSWER, citations=[cited])
    page.goto(f"{log_in_as_alice(page, live_web)}/chat/{conversation.pk}/")
    answer = page.locator(".answer-turn .answer")
    answer.locator("table.answer-table").wait_for()
    assert answer.locator("ol > li").count() == 2
    assert answer.locator("li code").first.inner_text() == "FIT_LIMIT"
    assert answer.locator("strong").inner_text() == "early"
    assert answer.locator("td").all_inner_texts() == ["FIT_LIMIT", "1e-5 [1]"]
    assert answer.locator("pre code").inner_text() == "set fit limit 1e-5"
    assert answer.locator("button.citation-link").count() == 4
    assert answer.locator("img").count() == 0
    assert "<img src=x" in answer.inner_text()
    assert page.title() != "owned"
    page.screenshot(path=str(tmp_path / "markdown.png"), full_page=True)

    answer.locator("button.citation-link").first.click()
    dialog = page.locator("dialog#citation-dialog")
    dialog.locator("mark").wait_for()
    assert dialog.locator("mark").inner_text() == "The default value of FIT_LIMIT is 1e-5."
    assert dialog.locator(".citation-snippet").inner_text() == passage


def test_a_citation_boxes_its_quote_on_the_page_render_over_the_chunks_box(live_web, page, alice, private_collection):
    """The quote's box (`quote_bbox`) is drawn on the render where it says, inside the chunk's
    box; a citation without one shows the chunk's box alone."""
    from django.core.files.base import ContentFile

    from ingestion import actions
    from knowledge.models import Page
    from tests.assistant.test_chat_page import citation_on, make_conversation
    from tests.ingestion.files import png

    document, _run = actions.do_add_document(private_collection, "policy.pdf", b"%PDF-1.4 stand-in", enqueue=False)
    pdf_page = Page.objects.create(
        document=document, number=2, kind="pdf_page", content_sha256="0" * 64, width=612.0, height=792.0
    )
    pdf_page.render.save("2.png", ContentFile(png(306, 396)), save=True)  # drawn at half the page's size
    sizes = {"page_width": 612.0, "page_height": 792.0, "location": {"page": 2, "bbox": [72.0, 100.0, 540.0, 300.0]}}
    quoted = {**citation_on(pdf_page), **sizes, "quote_bbox": [72.0, 200.0, 306.0, 230.6]}
    plain = {**citation_on(pdf_page, n=2), **sizes, "quote_bbox": None}
    conversation = make_conversation(alice, "leave", "Five days carry over [1]. See [2].", citations=[quoted, plain])
    page.goto(f"{log_in_as_alice(page, live_web)}/chat/{conversation.pk}/")

    dialog = page.locator("dialog#citation-dialog")
    page.locator(".answer-turn button.citation-link").nth(0).click()
    quote = dialog.locator(".page-view .quote-box")
    quote.wait_for(state="visible")
    image = dialog.locator(".page-view img").bounding_box()
    chunk = dialog.locator(".page-view .bbox").bounding_box()
    drawn = quote.bounding_box()
    assert image is not None
    assert chunk is not None
    assert drawn is not None
    scale = image["width"] / 612.0  # the render as shown, whatever its size
    for got, want in (
        (drawn["x"] - image["x"], 72.0),
        (drawn["y"] - image["y"], 200.0),
        (drawn["width"], 234.0),
        (drawn["height"], 30.6),
    ):
        assert abs(got - want * scale) < 2, (drawn, image)
    assert chunk["y"] < drawn["y"]  # drawn over the chunk's box, inside it
    assert drawn["y"] + drawn["height"] < chunk["y"] + chunk["height"]
    # Zoomed to the quote: shown at twice its width in the render (the most the render allows:
    # 306 px for 612 points, so 117 px), scrolled into view; the whole page is a click away.
    assert "zoomed" in (dialog.locator(".page-view").get_attribute("class") or "")
    assert drawn["width"] >= 2 * 234.0 * 306 / 612 - 1
    scroller = dialog.locator(".page-scroll").bounding_box()
    assert scroller is not None
    assert scroller["y"] <= drawn["y"]
    assert drawn["y"] + drawn["height"] <= scroller["y"] + scroller["height"]
    whole = dialog.locator("button.zoom")
    assert whole.inner_text() == "Whole page"
    whole.click()
    assert "zoomed" not in (dialog.locator(".page-view").get_attribute("class") or "")
    fitted = dialog.locator(".page-view img").bounding_box()
    assert fitted is not None
    assert fitted["width"] <= scroller["width"]
    assert whole.inner_text() == "Zoom to the passage"
    page.keyboard.press("Escape")

    page.locator(".answer-turn button.citation-link").nth(1).click()
    dialog.locator(".page-view .bbox").wait_for(state="visible")
    assert not quote.is_visible()  # no quote box: the chunk's box alone, as before


def log_in_as_alice(page, live_web: int) -> str:
    """Log in as alice through the login page; returns the portal's base URL."""
    base = f"http://127.0.0.1:{live_web}"
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=login]", "alice@example.com")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    return base


def test_a_citation_of_a_synced_file_links_back_to_its_source(live_web, page, alice):
    """A file a source brought in: the dialog names the source and links to the file there;
    an address that is not http(s) is shown as the path alone, never as a link."""
    from tests.assistant.test_chat_page import make_conversation

    def cited(n: int, url: str) -> dict[str, object]:
        return {
            "n": n,
            "inferred": False,
            "file": "setup.md",
            "path": "docs/guide/setup.md",
            "place": "section 1",
            "page": 1,
            "snippet": "Run the installer twice.",
            "text": "Run the installer twice.",
            "quote": "",
            "location": {},
            "origin": {"name": "Team wiki", "kind": "git", "path": "guide/setup.md", "url": url},
        }

    link = "https://git.example.com/team/wiki/src/branch/main/guide/setup.md"
    conversation = make_conversation(
        alice, "setup", "Run it twice [1]. Really [2].", citations=[cited(1, link), cited(2, "javascript:alert(1)")]
    )
    page.goto(f"{log_in_as_alice(page, live_web)}/chat/{conversation.pk}/")
    dialog = page.locator("dialog#citation-dialog")
    page.locator(".answer-turn button.citation-link").nth(0).click()
    origin = dialog.locator(".citation-origin")
    origin.wait_for(state="visible")
    assert origin.locator(".citation-origin-name").inner_text() == "Team wiki"
    anchor = origin.locator("a.citation-origin-link")
    assert anchor.inner_text() == "guide/setup.md"
    assert anchor.get_attribute("href") == link
    dialog.locator("button.close").click()

    page.locator(".answer-turn button.citation-link").nth(1).click()
    origin.wait_for(state="visible")
    assert origin.locator(".citation-origin-path").inner_text() == "guide/setup.md"
    assert not anchor.is_visible()
    assert "javascript" not in (anchor.get_attribute("href") or "")

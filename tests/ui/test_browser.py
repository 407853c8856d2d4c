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
    base = f"http://127.0.0.1:{live_web}"
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=login]", "alice@example.com")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    page.goto(f"{base}/chat/{conversation.pk}/")
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

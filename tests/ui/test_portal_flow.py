"""The portal as a person uses it, in a real browser (Debian's Chromium through Playwright)
against real daphne, a real Celery worker, PostgreSQL + pgvector, Redis and the local models:
log in, create a collection, upload a PDF and a PNG and watch them reach done, ask in
Chinese, see the answer stream, open a citation on the right page image, see the picture
attached, find the new memory on My memory; charlie sees none of it.

Screenshots of every page go to $PORTAL_VAR_DIR/screenshots/ (CI keeps them as artifacts)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings

from assistant.memory.service import memories
from knowledge.models import Collection, Document, Page
from tests.assistant.chat_files import policy_pdf
from tests.conftest import PASSWORD
from tests.ingestion.image_files import text_image
from tests.stack import wait_for

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True)]

QUESTION = "我在西安办公室工作。未休完的年假可以累积吗？请给我看年假申请流程的图片。"


def shots() -> Path:
    folder = Path(settings.VAR_DIR) / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def log_in(page, base: str, email: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=login]", email)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def test_upload_ask_cite_remember_and_charlie_sees_nothing(
    live_web,
    live_worker,
    page,
    alice,
    charlie,
    tmp_path,
):
    base = f"http://127.0.0.1:{live_web}"
    pdf = tmp_path / "年假制度.pdf"
    pdf.write_bytes(policy_pdf())
    png = tmp_path / "年假申请流程.png"
    png.write_bytes(text_image(["年假申请流程", "员工提交申请，主管审批，人事备案"]))

    log_in(page, base, "alice@example.com")
    page.screenshot(path=str(shots() / "01-dashboard.png"), full_page=True)
    page.fill("input[name=name]", "员工手册")
    page.click("text=Create collection")
    page.wait_for_selector("h1:text('员工手册')")
    collection = Collection.objects.get(name="员工手册")

    # Upload both at once; each file's row goes from its upload to the parsed pages to done.
    page.set_input_files("input#files", [str(pdf), str(png)])
    page.click("#upload-form button[type=submit]")
    for name in (pdf.name, png.name):
        page.wait_for_selector(f'.upload-row[data-name="{name}"]', timeout=30_000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.upload-row')].length === 2 && "
        "[...document.querySelectorAll('.upload-row')].every(row => row.dataset.state === 'done')",
        timeout=240_000,
    )
    page.screenshot(path=str(shots() / "02-collection-uploaded.png"), full_page=True)
    assert Document.objects.filter(collection=collection, status="ready").count() == 2

    # Ask in Chinese: the answer streams, cites page 2 of the PDF, and attaches the picture.
    page.goto(f"{base}/chat/")
    page.check(f'input[name=collections][value="{collection.pk}"]')
    page.fill("#question", QUESTION)
    page.click("#send")
    page.wait_for_function(
        "() => document.querySelector('.answer-turn:last-child .answer')?.textContent.trim().length > 0",
        timeout=240_000,  # the local model loads and routes first
    )
    page.wait_for_selector("#send:not([disabled])", timeout=240_000)
    page.screenshot(path=str(shots() / "03-chat-answer.png"), full_page=True)
    answer = page.inner_text(".answer-turn:last-child .answer")
    assert answer.strip()
    assert page.locator(".memory-used").count() >= 1

    leave_page = Page.objects.get(document__collection=collection, document__name=pdf.name, number=2)
    links = page.locator(".answer-turn:last-child .citation-link")
    assert links.count() >= 1, answer
    opened = []
    for index in range(links.count()):
        links.nth(index).click()
        image = page.locator("dialog#citation-dialog img")
        image.wait_for(state="visible")  # shown once the cited page's image has loaded
        assert image.evaluate("img => img.complete && img.naturalWidth > 0")
        opened.append(image.get_attribute("src") or "")
        if f"/pages/{leave_page.pk}/" in opened[-1]:
            assert page.locator("dialog#citation-dialog .bbox").is_visible()  # the cited lines, boxed
            page.screenshot(path=str(shots() / "04-citation.png"))
            opens = page.locator("dialog#citation-dialog a.citation-open").get_attribute("href") or ""
            assert opens.startswith(f"/documents/{leave_page.document_id}/pages/2/?chunk="), opens
            break
        page.keyboard.press("Escape")
    assert any(f"/pages/{leave_page.pk}/" in src for src in opened), (answer, opened)
    page.keyboard.press("Escape")
    assert page.locator(".answer-turn:last-child .attachment img").count() >= 1, answer

    # The worker turns the question and answer into memories; My memory shows them.
    wait_for(lambda: memories().all(alice), 180, "memories of the conversation", every=2)
    page.goto(f"{base}/memory/")
    page.screenshot(path=str(shots() / "05-memory.png"), full_page=True)
    remembered = [item.text for item in memories().all(alice)]
    assert remembered
    assert all(text[:20] in page.content() for text in remembered)

    # The other pages, for the record (CI keeps the screenshots), and the chat on a phone.
    document = Document.objects.get(collection=collection, name=pdf.name)
    for name, path in (
        ("07-document", f"/documents/{document.pk}/"),
        ("08-document-page", f"/documents/{document.pk}/pages/2/"),
        ("09-teams", "/teams/"),
        ("10-tokens", "/tokens/"),
        ("11-account", "/accounts/email/"),
    ):
        assert page.goto(f"{base}{path}").status == 200, path
        page.screenshot(path=str(shots() / f"{name}.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{base}/chat/{alice.conversations.get().pk}/")
    page.screenshot(path=str(shots() / "12-chat-phone.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 800})

    # charlie: no collection, no conversation, no memory of alice's, and 404 on her pages.
    page.context.clear_cookies()
    log_in(page, base, "charlie@example.com")
    assert "员工手册" not in page.content()
    page.goto(f"{base}/chat/")
    assert QUESTION[:10] not in page.content()
    page.goto(f"{base}/memory/")
    assert all(text[:20] not in page.content() for text in remembered)
    page.screenshot(path=str(shots() / "13-charlie-memory.png"), full_page=True)
    for path in (f"/collections/{collection.pk}/", f"/chat/{alice.conversations.get().pk}/"):
        assert page.goto(f"{base}{path}").status == 404

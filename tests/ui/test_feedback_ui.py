"""Feedback in a real browser: alice rates a stored answer with a thumb, corrects it (the
right answer, document and page), sees it again after a reload, and withdraws it."""

from __future__ import annotations

import pytest

from quality.models import Feedback
from tests.quality.test_feedback import answer, document
from tests.ui.test_portal_flow import log_in

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True)]


def test_alice_rates_corrects_and_withdraws_feedback(live_web, page, alice, private_collection, tmp_path):
    document(private_collection, "handbook.pdf", pages=12)
    right = document(private_collection, "travel policy.pdf", pages=30)
    message = answer(alice, private_collection)
    base = f"http://127.0.0.1:{live_web}"
    log_in(page, base, "alice@example.com")
    page.goto(f"{base}/chat/{message.conversation_id}/")
    turn = page.locator(f"article[data-message='{message.pk}']")
    down = turn.get_by_role("button", name="Not helpful")
    assert down.get_attribute("aria-pressed") == "false"
    # The earlier answer of the conversation has its own thumbs.
    assert page.get_by_role("button", name="Not helpful").count() == 2

    down.click()
    turn.locator(".feedback-status", has_text="saved").wait_for()
    assert down.get_attribute("aria-pressed") == "true"
    assert turn.get_by_role("button", name="Helpful", exact=True).get_attribute("aria-pressed") == "false"
    assert Feedback.objects.get(message=message).rating == "down"

    turn.locator("summary", has_text="Comment or correct").click()
    select = turn.locator("select[name=correct_document]")
    select.locator(f"option[value='{right.pk}']").wait_for(state="attached")
    assert select.locator("optgroup[label='Cited in this answer'] option").all_inner_texts() == ["handbook.pdf"]
    turn.get_by_label("Comment").fill("The cap changed in 2026.")
    turn.get_by_label("The right answer is…").fill("150 EUR a night")
    select.select_option(str(right.pk))
    turn.get_by_label("on page, slide or minute").fill("31")
    turn.get_by_role("button", name="Save feedback").click()
    error = turn.locator(".feedback-error")
    error.wait_for()
    assert "from 1 to 30" in error.inner_text()  # the document has 30 pages
    turn.get_by_label("on page, slide or minute").fill("7")
    turn.get_by_role("button", name="Save feedback").click()
    turn.locator(".feedback-status", has_text="saved").wait_for()
    assert error.is_hidden()
    feedback = Feedback.objects.get(message=message)
    assert (feedback.rating, feedback.comment, feedback.correct_answer) == (
        "down",
        "The cap changed in 2026.",
        "150 EUR a night",
    )
    assert (feedback.correct_document_id, feedback.correct_page) == (right.pk, 7)
    page.screenshot(path=str(tmp_path / "feedback.png"), full_page=True)

    # The collection's owner reads it on the collection's Feedback page.
    page.goto(f"{base}/collections/{private_collection.pk}/feedback/")
    item = page.locator(".feedback-item")
    assert item.count() == 1
    assert "150 EUR a night" in item.inner_text()
    assert "travel policy.pdf p. 7" in item.inner_text()
    assert "handbook.pdf p. 3" in item.inner_text()
    page.screenshot(path=str(tmp_path / "collection-feedback.png"), full_page=True)

    page.goto(f"{base}/chat/{message.conversation_id}/")
    turn = page.locator(f"article[data-message='{message.pk}']")
    assert turn.get_by_role("button", name="Not helpful").get_attribute("aria-pressed") == "true"
    turn.locator("summary", has_text="Comment or correct").click()
    assert turn.get_by_label("Comment").input_value() == "The cap changed in 2026."
    assert turn.locator("select[name=correct_document]").input_value() == str(right.pk)
    assert turn.get_by_label("on page, slide or minute").input_value() == "7"

    # A thumb up keeps the comment and the correction.
    turn.get_by_role("button", name="Helpful", exact=True).click()
    turn.locator("button.rate[data-rating=up][aria-pressed=true]").wait_for()
    feedback.refresh_from_db()
    assert (feedback.rating, feedback.correct_page) == ("up", 7)

    turn.get_by_role("button", name="Remove my feedback").click()
    turn.locator(".feedback-status", has_text="removed").wait_for()
    assert not Feedback.objects.filter(message=message).exists()
    assert turn.locator("button.rate[aria-pressed=true]").count() == 0
    assert turn.get_by_label("Comment").input_value() == ""

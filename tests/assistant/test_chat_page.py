"""The chat page (/chat/, /chat/<id>/): the user's conversations only, the stored turns with
their citations, deleting a conversation. The streaming itself is the websocket's
(test_chat_socket.py) and the browser test's."""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.base import ContentFile
from django.urls import reverse

from assistant.chat_views import linked
from assistant.models import Conversation, Message
from ingestion.actions import do_add_document
from knowledge import actions
from knowledge.models import Page

pytestmark = pytest.mark.usefixtures("media")


def make_conversation(user, title: str, answer: str = "", **fields) -> Conversation:
    conversation = Conversation.objects.create(user=user, title=title)
    Message.objects.create(conversation=conversation, role="user", content=title)
    if answer:
        Message.objects.create(conversation=conversation, role="assistant", content=answer, **fields)
    return conversation


def citations_json(page: str) -> dict[str, list[dict]]:
    found = re.search(r'<script id="chat-citations" type="application/json">(.*?)</script>', page, re.S)
    assert found, "the page embeds its citations"
    return json.loads(found.group(1))


@pytest.fixture
def cited_page(private_collection) -> Page:
    document, _run = do_add_document(private_collection, "policy.pdf", b"%PDF-1.4 stand-in")
    page = Page.objects.create(
        document=document, number=2, kind="pdf_page", content_sha256="0" * 64, width=612.0, height=792.0
    )
    page.render.save("2.png", ContentFile(b"\x89PNG stand-in"), save=True)
    return page


def citation_on(page: Page, n: int = 1) -> dict:
    """A citation as assistant/answering/answer.py `citation()` stored it before it carried page sizes."""
    return {
        "n": n,
        "inferred": False,
        "chunk_id": 7,
        "document_id": page.document_id,
        "collection_id": page.document.collection_id,
        "file": page.document.name,
        "path": page.document.rel_path,
        "page": page.number,
        "page_id": page.pk,
        "page_kind": page.kind,
        "place": "page 2",
        "location": {"page": 2, "bbox": [72.0, 100.0, 540.0, 180.0]},
        "snippet": "Unused leave carries over, five days at most.",
        "thumbnail_url": f"/api/pages/{page.pk}/render/",
    }


def test_it_sends_anonymous_visitors_to_login(client):
    response = client.get(reverse("chat"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("account_login"))


def test_it_lists_alices_conversations_newest_first_and_never_charlies(client, alice, charlie):
    older = make_conversation(alice, "Where is the Berlin office?")
    newer = make_conversation(alice, "How many leave days carry over?")
    make_conversation(charlie, "Charlie's secret question")
    client.force_login(alice)
    page = client.get(reverse("chat")).content.decode()
    assert page.index("How many leave days carry over?") < page.index("Where is the Berlin office?")
    assert f'href="{reverse("chat-conversation", args=[newer.pk])}"' in page
    assert f'action="{reverse("chat-delete", args=[older.pk])}"' in page
    assert "Charlie&#x27;s secret question" not in page
    assert 'id="new-chat"' in page
    assert f'href="{reverse("chat")}"' in page  # the navigation link


def test_it_offers_only_the_collections_alice_may_see(client, alice, charlie, private_collection, team_collection):
    actions.do_create_collection(charlie, "Charlie's drafts")
    client.force_login(alice)
    page = client.get(reverse("chat")).content.decode()
    assert f'name="collections" value="{private_collection.pk}"' in page
    assert f'name="collections" value="{team_collection.pk}"' in page
    assert "Charlie&#x27;s drafts" not in page
    for control in ('id="composer"', 'id="question"', 'id="send"', 'id="cancel"', 'id="citation-dialog"'):
        assert control in page


def test_it_renders_the_stored_turns_with_their_citations(client, alice, cited_page, private_collection):
    conversation = make_conversation(
        alice,
        "未休完的年假可以累积吗？",
        answer="可以累积，最多五天 [1]。<b>not markup</b> 【2】",
        strategy="rewrite",
        rewrite="年假 累积 上限",
        citations=[citation_on(cited_page)],
        attachments=[{"kind": "image", "file": "poster.png", "url": "/api/pages/9/images/ab/"}],
    )
    conversation.collections.add(private_collection)
    client.force_login(alice)
    response = client.get(reverse("chat-conversation", args=[conversation.pk]))
    page = response.content.decode()
    assert response.status_code == 200
    assert "未休完的年假可以累积吗？" in page
    assert '<button type="button" class="citation-link" data-n="1" aria-label="Source 1">[1]</button>' in page
    assert 'data-n="2"' in page  # a full-width mark is a link too
    assert "&lt;b&gt;not markup&lt;/b&gt;" in page
    assert "Searched for: 年假 累积 上限" in page
    assert "Strategy: Rewrite" in page
    assert '<img src="/api/pages/9/images/ab/" alt="poster.png"' in page
    assert f'name="collections" value="{private_collection.pk}" checked' in page
    answer = conversation.messages.get(role="assistant")
    (cited,) = citations_json(page)[str(answer.pk)]
    assert cited["thumbnail_url"] == f"/api/pages/{cited_page.pk}/render/"
    assert cited["location"]["bbox"] == [72.0, 100.0, 540.0, 180.0]
    # Stored before citations carried the page's size: the page adds it, for the highlight.
    assert (cited["page_width"], cited["page_height"]) == (612.0, 792.0)


def test_it_says_why_a_stored_answer_stopped(client, alice):
    conversation = make_conversation(alice, "A long question", answer="Half an ans", error="cancelled")
    client.force_login(alice)
    page = client.get(reverse("chat-conversation", args=[conversation.pk])).content.decode()
    assert "Cancelled: the answer stopped here." in page
    assert "Half an ans" in page


def test_it_gives_charlie_404_for_alices_conversation(client, alice, charlie):
    conversation = make_conversation(alice, "alice's question", answer="alice's answer")
    client.force_login(charlie)
    response = client.get(reverse("chat-conversation", args=[conversation.pk]))
    assert response.status_code == 404
    assert "alice&#x27;s" not in response.content.decode()


def test_it_deletes_alices_conversation_for_her(client, alice):
    conversation = make_conversation(alice, "Delete me", answer="Gone soon")
    client.force_login(alice)
    response = client.post(reverse("chat-delete", args=[conversation.pk]))
    assert response.status_code == 302
    assert response["Location"] == reverse("chat")
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    assert not Message.objects.filter(conversation_id=conversation.pk).exists()


def test_it_refuses_to_delete_for_others_and_on_get(client, alice, charlie):
    conversation = make_conversation(alice, "Keep me")
    client.force_login(charlie)
    assert client.post(reverse("chat-delete", args=[conversation.pk])).status_code == 404
    client.force_login(alice)
    assert client.get(reverse("chat-delete", args=[conversation.pk])).status_code == 405
    assert Conversation.objects.filter(pk=conversation.pk).exists()


def test_it_deletes_through_the_api_with_the_csrf_header(alice):
    from django.test import Client

    conversation = make_conversation(alice, "Delete me by API")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    page = browser.get(reverse("chat"))
    token = page.cookies["csrftoken"].value
    url = f"/api/conversations/{conversation.pk}/"
    assert browser.delete(url).status_code == 403  # no CSRF header: refused
    assert browser.delete(url, headers={"X-CSRFToken": token}).status_code == 204
    assert not Conversation.objects.filter(pk=conversation.pk).exists()


def test_it_links_every_form_of_citation_mark():
    html = linked("a [1] b [2, 3] c 【4】 d [x] <i>")
    assert re.findall(r'data-n="(\d+)"', html) == ["1", "2", "3", "4"]
    assert "[x] &lt;i&gt;" in html


def test_a_stored_answer_shows_the_collections_it_searched(client, alice, private_collection):
    conversation = Conversation.objects.create(user=alice, title="q")
    Message.objects.create(conversation=conversation, role="user", content="q")
    searched = [{"id": private_collection.pk, "name": "Alice's notes"}, {"id": 99, "name": "Team <b>handbook</b>"}]
    Message.objects.create(
        conversation=conversation, role="assistant", content="a", strategy="direct", searched=searched
    )
    client.force_login(alice)
    page = client.get(f"/chat/{conversation.pk}/").content.decode()
    assert "Collections searched: Alice&#x27;s notes, Team &lt;b&gt;handbook&lt;/b&gt;" in page


def found_json(page: str) -> dict[str, dict]:
    found = re.search(r'<script id="chat-found" type="application/json">(.*?)</script>', page, re.S)
    assert found, "the page embeds how each stored answer was found"
    return json.loads(found.group(1))


def test_a_stored_answer_carries_its_evidence_and_decisions_for_the_page(client, alice, monkeypatch):
    """The page hands chat.js each stored answer's evidence, decisions, mode and closest
    passages, as the answer showed them live; answers kept before these were stored (and
    messages without the fields) give empty ones."""
    from assistant import chat_views

    conversation = make_conversation(alice, "Falcon 保修多久？", answer="两年 [1]。", abstain=False)
    Message.objects.create(conversation=conversation, role="user", content="Heron?")
    older = Message.objects.create(conversation=conversation, role="assistant", content="Older answer")
    evidence = {"quote": "Falcon 路由器的保修期为两年。", "confidence": 0.9, "citation": {"n": 1}, "step": None}
    decisions = [{"stage": "decide", "outcome": "answer", "reason": "", "figures": {"score": 0.9}, "final": True}]
    real = chat_views._messages

    def with_evidence(conversation):
        stored = real(conversation)
        answer = next(message for message in stored if message.role == "assistant")
        answer.evidence, answer.decisions, answer.mode, answer.closest = [evidence], decisions, "evidence", []
        return stored

    monkeypatch.setattr(chat_views, "_messages", with_evidence)
    client.force_login(alice)
    page = client.get(reverse("chat-conversation", args=[conversation.pk])).content.decode()
    found = found_json(page)
    answer = conversation.messages.filter(role="assistant").first()
    assert answer is not None
    assert found[str(answer.pk)] == {
        "evidence": [evidence],
        "decisions": decisions,
        "mode": "evidence",
        "closest": [],
        "abstain": False,
    }
    assert found[str(older.pk)] == {"evidence": [], "decisions": [], "mode": "", "closest": [], "abstain": False}
    assert set(found) == {str(answer.pk), str(older.pk)}  # answers only
    assert '<details class="found" hidden>' in page
    assert "How it was found" in page

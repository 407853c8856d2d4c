"""Feedback on answers: given, changed and withdrawn by the answer's own user over
/api/messages/<id>/feedback/, kept with a snapshot of the answer; read by collection admins
(the list, the collection's Feedback page) and by nobody else; a correction names a document
of the collections the answer searched, and the chat page shows the user's feedback."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.http import Http404
from django.urls import reverse

from assistant.models import Conversation, Message
from knowledge import actions as knowledge_actions
from knowledge.models import Document, Role
from quality import actions
from quality.models import Feedback
from tests.conftest import make_collection, set_role, token_for

pytestmark = pytest.mark.django_db


def document(collection, name: str = "handbook.pdf", pages: int = 12) -> Document:
    return Document.objects.create(
        collection=collection,
        name=name,
        rel_path=name,
        mime="application/pdf",
        size=1,
        sha256=name.encode().hex().ljust(64, "0")[:64],
        status=Document.Status.READY,
        page_count=pages,
    )


def answer(user, *collections, question: str = "What is the hotel cap?", error: str = "") -> Message:
    """A stored answer of `user`'s that searched `collections`, citing page 3 of each one's
    first document."""
    conversation = Conversation.objects.create(user=user, title=question)
    Message.objects.create(conversation=conversation, role="user", content="An earlier question")
    Message.objects.create(conversation=conversation, role="assistant", content="An earlier answer")
    Message.objects.create(conversation=conversation, role="user", content=question)
    cited = [c.documents.order_by("pk").first() for c in collections]
    citations = [
        {
            "n": n,
            "file": document.name,
            "path": document.rel_path,
            "page": 3,
            "document_id": document.pk,
            "collection_id": document.collection_id,
            "chunk_id": 77,
            "score": 0.91,
            "snippet": "Hotels are capped at 120 EUR a night.",
            "thumbnail_url": "/api/pages/1/render/",
        }
        for n, document in enumerate((d for d in cited if d), start=1)
    ]
    return Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="Hotels are capped at 120 EUR [1].",
        strategy="direct",
        citations=citations,
        timings={"total": 2.5, "retrieval": 0.4},
        searched=[{"id": c.pk, "name": c.name, "version": 3} for c in collections],
        models_used={"chat": "ollama:qwen3:4b", "embedding": "local:bge-m3"},
        error=error,
    )


@pytest.fixture
def handbook(private_collection) -> Document:
    return document(private_collection)


@pytest.fixture
def alices_answer(alice, private_collection, handbook) -> Message:
    return answer(alice, private_collection)


def url(message: Message) -> str:
    return reverse("message-feedback", kwargs={"message_id": message.pk})


# -- giving feedback ------------------------------------------------------------------------


def test_put_gives_feedback_with_a_snapshot_of_the_answer(api, alice, private_collection, handbook, alices_answer):
    token_for(api, alice)
    response = api.put(
        url(alices_answer),
        {
            "rating": "down",
            "comment": "Too vague",
            "correct_answer": "150 EUR in capitals",
            "correct_document": handbook.pk,
            "correct_page": 4,
        },
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["rating"] == "down"
    assert body["mine"] is True
    assert body["conversation"] == alices_answer.conversation_id
    assert body["correct_document_name"] == "handbook.pdf"
    feedback = Feedback.objects.get(message=alices_answer)
    assert feedback.user == alice
    assert feedback.question == "What is the hotel cap?"  # the question just before, not the first
    assert feedback.answer == "Hotels are capped at 120 EUR [1]."
    assert feedback.citations == [
        {
            "file": "handbook.pdf",
            "path": "handbook.pdf",
            "page": 3,
            "document_id": handbook.pk,
            "collection_id": private_collection.pk,
            "chunk_id": 77,
            "score": 0.91,
        }
    ]
    assert feedback.strategy == "direct"
    assert feedback.abstain is False
    assert feedback.timings == {"total": 2.5, "retrieval": 0.4}
    assert feedback.versions == [{"collection": private_collection.pk, "version": 3}]
    assert feedback.models_used == {"chat": "ollama:qwen3:4b", "embedding": "local:bge-m3"}
    assert list(feedback.collections.all()) == [private_collection]
    assert (feedback.correct_document, feedback.correct_page) == (handbook, 4)
    assert (feedback.comment, feedback.correct_answer) == ("Too vague", "150 EUR in capitals")


def test_put_again_replaces_patch_changes_delete_withdraws(api, alice, handbook, alices_answer):
    api.force_login(alice)
    first = {"rating": "down", "comment": "wrong", "correct_document": handbook.pk, "correct_page": 2}
    assert api.put(url(alices_answer), first).status_code == 201
    replaced = api.put(url(alices_answer), {"rating": "up"})
    assert replaced.status_code == 200
    assert replaced.json()["comment"] == ""  # PUT replaces all of it
    assert replaced.json()["correct_document"] is None
    assert Feedback.objects.count() == 1

    changed = api.patch(url(alices_answer), {"comment": "right after all"})
    assert changed.status_code == 200
    assert (changed.json()["rating"], changed.json()["comment"]) == ("up", "right after all")
    flipped = api.patch(url(alices_answer), {"rating": "down"})
    assert (flipped.json()["rating"], flipped.json()["comment"]) == ("down", "right after all")

    assert api.get(url(alices_answer)).json()["rating"] == "down"
    assert api.delete(url(alices_answer)).status_code == 204
    assert not Feedback.objects.exists()
    assert api.get(url(alices_answer)).status_code == 404
    assert api.delete(url(alices_answer)).status_code == 404
    assert api.patch(url(alices_answer), {"rating": "up"}).status_code == 404  # nothing to change: PUT gives


def test_a_patch_that_drops_the_document_drops_its_page(api, alice, handbook, alices_answer):
    api.force_login(alice)
    api.put(url(alices_answer), {"rating": "down", "correct_document": handbook.pk, "correct_page": 5})
    response = api.patch(url(alices_answer), {"correct_document": None})
    assert response.status_code == 200
    assert (response.json()["correct_document"], response.json()["correct_page"]) == (None, None)


def test_someone_elses_answer_is_not_found(api, alice, bob, team, team_collection, alices_answer):
    """Even bob, an admin of alice's team, cannot rate (nor read the rating of) her answer."""
    set_role(team, bob, Role.ADMIN)
    teams_answer = answer(alice, team_collection)
    actions.do_give_feedback(alice, teams_answer, "up")
    api.force_login(bob)
    for message in (alices_answer, teams_answer):
        assert api.put(url(message), {"rating": "up"}).status_code == 404
        assert api.get(url(message)).status_code == 404
        assert api.patch(url(message), {"rating": "down"}).status_code == 404
        assert api.delete(url(message)).status_code == 404
    assert Feedback.objects.get().rating == "up"  # alice's, unchanged
    with pytest.raises(Http404):
        actions.do_give_feedback(bob, alices_answer, "up")


def test_a_stranger_gets_404_before_any_validation(api, charlie, alices_answer):
    api.force_login(charlie)
    assert api.put(url(alices_answer), {"rating": "sideways"}).status_code == 404
    assert api.put(reverse("message-feedback", kwargs={"message_id": 99999999}), {"rating": "up"}).status_code == 404


def test_questions_and_failed_answers_cannot_be_rated(api, alice, private_collection, handbook):
    failed = answer(alice, private_collection, error="cancelled")
    api.force_login(alice)
    response = api.put(url(failed), {"rating": "down"})
    assert response.status_code == 400
    assert "stopped before it was finished" in str(response.json())
    question = Message.objects.filter(conversation=failed.conversation, role="user").latest("pk")
    response = api.put(url(question), {"rating": "up"})
    assert response.status_code == 400
    assert "Only answers can be rated" in str(response.json())
    assert not Feedback.objects.exists()


def test_bad_input_gets_a_readable_400(api, alice, handbook, alices_answer):
    api.force_login(alice)
    cases = [
        ({"rating": "sideways"}, "rating"),
        ({}, "rating"),
        ({"rating": "up", "correct_page": 0}, "correct_page"),
        ({"rating": "up", "correct_page": 3}, "correct_page"),  # a page needs its document
        ({"rating": "up", "correct_document": handbook.pk, "correct_page": 13}, "correct_page"),  # 12 pages
        ({"rating": "up", "correct_document": "abc"}, "correct_document"),
    ]
    for body, field in cases:
        response = api.put(url(alices_answer), body)
        assert response.status_code == 400, (body, response.content)
        assert field in response.json(), (body, response.json())
    assert "from 1 to 12" in str(api.put(url(alices_answer), cases[4][0]).json())
    assert not Feedback.objects.exists()


def test_a_correction_must_name_a_document_the_user_sees_in_a_searched_collection(
    api, alice, charlie, private_collection, handbook, alices_answer
):
    charlies = document(make_collection(charlie, "Charlie's"), "secret.pdf")
    elsewhere = document(make_collection(alice, "Alice's other"), "other.pdf")  # hers, but not searched
    api.force_login(alice)
    for other in (charlies, elsewhere):
        response = api.put(url(alices_answer), {"rating": "down", "correct_document": other.pk})
        assert response.status_code == 400
        message = response.json()["correct_document"][0]
        assert "collections this answer searched" in message
        assert "secret" not in message
    assert not Feedback.objects.exists()
    # A collection searched then but no longer visible to the user (she left the team) is refused too.
    with pytest.raises(ValidationError):
        actions.do_give_feedback(alice, answer(alice, charlies.collection), "down", correct_document=charlies.pk)


def test_a_deleted_collection_leaves_the_snapshot(alice, private_collection, handbook, alices_answer):
    feedback = actions.do_give_feedback(alice, alices_answer, "down", comment="keep me")
    collection_id = private_collection.pk
    private_collection.delete()
    feedback.refresh_from_db()
    assert feedback.comment == "keep me"
    assert feedback.versions == [{"collection": collection_id, "version": 3}]
    assert feedback.citations[0]["file"] == "handbook.pdf"
    # Rated again now, the answer's collection is gone: no collection is linked.
    again = actions.do_give_feedback(alice, Message.objects.get(pk=alices_answer.pk), "up")
    assert list(again.collections.all()) == []


# -- who reads feedback ---------------------------------------------------------------------


@pytest.fixture
def team_feedback(alice, bob, charlie, team, team_collection, private_collection, handbook):
    """alice's and charlie's feedback on answers that searched the team's collection (alice's
    also searched her private one), and charlie's on his own collection."""
    shared = document(team_collection, "team.pdf")
    knowledge_actions.do_add_member(team, charlie, Role.VIEWER)
    alices = actions.do_give_feedback(
        alice, answer(alice, team_collection, private_collection), "down", comment="alice says no"
    )
    charlies = actions.do_give_feedback(charlie, answer(charlie, team_collection), "up", comment="charlie likes it")
    own = make_collection(charlie, "Charlie's")
    document(own, "charlie.pdf")
    private = actions.do_give_feedback(charlie, answer(charlie, own), "down", comment="charlie private")
    return {"shared": shared, "alice": alices, "charlie": charlies, "charlie_private": private}


def ids(response) -> set[int]:
    assert response.status_code == 200, response.content
    return {item["id"] for item in response.json()["results"]}


def test_a_viewer_sees_only_their_own_feedback(api, charlie, team_feedback):
    token_for(api, charlie)
    listed = ids(api.get(reverse("feedback-list")))
    assert listed == {team_feedback["charlie"].pk, team_feedback["charlie_private"].pk}
    detail = reverse("feedback-detail", kwargs={"pk": team_feedback["alice"].pk})
    assert api.get(detail).status_code == 404
    assert "alice says no" not in api.get(reverse("feedback-list")).content.decode()


def test_the_collections_admin_sees_the_feedback_on_its_answers(
    api, alice, bob, team, team_collection, private_collection, team_feedback
):
    """bob administers the team: he reads alice's and charlie's feedback on answers that
    searched the team's collection, but not charlie's on charlie's own collection, and not
    the citations or versions of alice's private collection that her answer also searched."""
    set_role(team, bob, Role.ADMIN)
    api.force_login(bob)
    listed = ids(api.get(reverse("feedback-list")))
    assert listed == {team_feedback["alice"].pk, team_feedback["charlie"].pk}
    alices = api.get(reverse("feedback-detail", kwargs={"pk": team_feedback["alice"].pk})).json()
    assert alices["comment"] == "alice says no"
    assert alices["mine"] is False
    assert alices["conversation"] is None
    assert [cited["file"] for cited in alices["citations"]] == ["team.pdf"]  # not her private handbook
    assert alices["versions"] == [{"collection": team_collection.pk, "version": 3}]
    assert alices["collections"] == [team_collection.pk]
    assert api.get(reverse("feedback-detail", kwargs={"pk": team_feedback["charlie_private"].pk})).status_code == 404
    # The owner edits through the answer's route: the detail is read-only.
    assert api.patch(reverse("feedback-detail", kwargs={"pk": team_feedback["alice"].pk}), {}).status_code == 405


def test_the_list_filters(api, alice, bob, team, team_collection, private_collection, team_feedback):
    set_role(team, bob, Role.ADMIN)
    api.force_login(bob)
    listing = reverse("feedback-list")
    assert ids(api.get(listing, {"rating": "down"})) == {team_feedback["alice"].pk}
    assert ids(api.get(listing, {"rating": "up"})) == {team_feedback["charlie"].pk}
    assert ids(api.get(listing, {"mine": "true"})) == set()
    assert ids(api.get(listing, {"collection": team_collection.pk})) == {
        team_feedback["alice"].pk,
        team_feedback["charlie"].pk,
    }
    assert ids(api.get(listing, {"collection": private_collection.pk})) == set()  # not bob's to see
    api.force_login(alice)
    conversation = team_feedback["alice"].message.conversation_id
    assert ids(api.get(listing, {"mine": "true"})) == {team_feedback["alice"].pk}
    assert ids(api.get(listing, {"conversation": conversation})) == {team_feedback["alice"].pk}
    for bad in ({"rating": "meh"}, {"rating": ""}, {"mine": "maybe"}, {"collection": "x"}, {"collection": "0"}):
        response = api.get(listing, bad)
        assert response.status_code == 400, bad
        assert set(response.json()) == set(bad), response.json()


# -- the pages ------------------------------------------------------------------------------


def test_the_collection_feedback_page_for_its_admins(client, alice, bob, charlie, team, team_collection, team_feedback):
    page = reverse("collection-feedback", kwargs={"collection_id": team_collection.pk})
    client.force_login(alice)  # the team's admin
    response = client.get(page)
    assert response.status_code == 200
    text = response.content.decode()
    assert "alice says no" in text
    assert "charlie likes it" in text
    assert "charlie private" not in text
    assert "handbook.pdf p. 3" in text  # her own answer's citation, in her own collection
    assert "ollama:qwen3:4b" in text
    assert "v3" in text
    assert text.index("charlie likes it") < text.index("alice says no")  # newest first
    downs = client.get(page, {"rating": "down"}).content.decode()
    assert "alice says no" in downs
    assert "charlie likes it" not in downs
    client.force_login(charlie)  # a viewer of the team: sees the collection, may not manage it
    assert client.get(page).status_code == 403
    set_role(team, bob, Role.EDITOR)
    client.force_login(bob)
    assert client.get(page).status_code == 403


def test_a_stranger_gets_404_for_the_collection_feedback_page(client, private_collection, bob, team):
    client.force_login(bob)
    page = reverse("collection-feedback", kwargs={"collection_id": private_collection.pk})
    assert client.get(page).status_code == 404


def test_the_collection_page_hides_another_collections_citations(
    client, alice, bob, team, team_collection, team_feedback
):
    """bob administers the team: alice's answer also searched her private collection; its
    citation (her private handbook) is not on the team's Feedback page for him."""
    set_role(team, bob, Role.ADMIN)
    client.force_login(bob)
    text = client.get(reverse("collection-feedback", kwargs={"collection_id": team_collection.pk})).content.decode()
    assert "alice says no" in text
    assert "handbook.pdf" not in text
    assert "Open the conversation" not in text  # not his conversations


def test_my_feedback_page_links_to_the_conversations(client, alice, team_feedback):
    client.force_login(alice)
    text = client.get(reverse("my-feedback")).content.decode()
    assert "alice says no" in text
    assert "charlie likes it" not in text
    conversation = team_feedback["alice"].message.conversation_id
    assert reverse("chat-conversation", kwargs={"conversation_id": conversation}) in text


def test_the_chat_page_shows_the_users_feedback(client, alice, handbook, alices_answer):
    actions.do_give_feedback(
        alice, alices_answer, "down", comment="wrong cap", correct_document=handbook, correct_page=4
    )
    client.force_login(alice)
    text = client.get(reverse("chat-conversation", kwargs={"conversation_id": alices_answer.conversation_id}))
    html = text.content.decode()
    assert 'data-rating="down"' in html
    assert 'aria-pressed="true" aria-label="Not helpful"' in html
    assert "wrong cap</textarea>" in html
    assert f'<option value="{handbook.pk}" selected>handbook.pdf</option>' in html
    assert 'value="4"' in html
    # The earlier answer has no feedback: its thumbs are not pressed.
    assert html.count('aria-pressed="true"') == 1

"""A token limited to some collections means it everywhere (knowledge/principal.py): it
makes no token (least of all a broader one), manages nothing of the account, and reads the
per-user lists only where they are about its collections. The route-by-route column is in
tests/test_isolation.py; the websockets in tests/test_isolation_sockets.py."""

from __future__ import annotations

import pytest
from django.urls import reverse

from assistant.answering import pipeline
from assistant.answering.session import Session
from assistant.models import Conversation, Message
from audit.models import Entry
from knowledge import actions
from knowledge.models import ApiToken, Invitation
from knowledge.principal import limited_message
from knowledge.revocation import still_signed_in
from quality.models import Feedback

pytestmark = pytest.mark.django_db


@pytest.fixture
def limited(alice, team_collection) -> tuple[ApiToken, str]:
    """alice's token (not read-only) limited to her team's collection."""
    return actions.do_create_token(alice, "limited", collections=[team_collection])


def _as(api, key: str):
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api


def test_a_limited_token_makes_no_token(api, alice, limited):
    token, key = limited
    before = set(ApiToken.objects.values_list("pk", flat=True))
    for body in (
        {"name": "x"},
        {"name": "x", "collections": [token.collections.get().pk]},
        {"name": "x", "read_only": True},
    ):
        response = _as(api, key).post("/api/tokens/", body, format="json")
        assert response.status_code == 403, (body, response.status_code)
        assert response.json()["detail"] == limited_message()
    assert set(ApiToken.objects.values_list("pk", flat=True)) == before
    # nor lists the account's other tokens, nor revokes one
    assert _as(api, key).get("/api/tokens/").status_code == 403
    assert _as(api, key).delete(f"/api/tokens/{token.pk}/").status_code == 403
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None


def test_a_misspelled_field_makes_no_token(api, alice, private_collection):
    """`collection_ids` for `collections`: a 400 naming it, not an unlimited token."""
    _token, key = actions.do_create_token(alice, "full")
    before = ApiToken.objects.count()
    response = _as(api, key).post(
        "/api/tokens/", {"name": "x", "collection_ids": [private_collection.pk]}, format="json"
    )
    assert response.status_code == 400
    assert list(response.json()) == ["collection_ids"]
    assert ApiToken.objects.count() == before
    made = _as(api, key).post("/api/tokens/", {"name": "y", "collections": [private_collection.pk]}, format="json")
    assert made.status_code == 201
    assert made.json()["collections"] == [private_collection.pk]


def test_a_limited_token_manages_no_team(api, alice, team, limited):
    _token, key = limited
    invite = _as(api, key).post(f"/api/teams/{team.pk}/invitations/", {"email": "eve@example.com", "role": "admin"})
    assert invite.status_code == 403
    assert not Invitation.objects.filter(email="eve@example.com").exists()
    assert _as(api, key).post("/api/teams/", {"name": "New"}).status_code == 403
    assert _as(api, key).patch(f"/api/teams/{team.pk}/", {"name": "Renamed"}).status_code == 403
    assert _as(api, key).post("/api/collections/", {"name": "Unseen"}).status_code == 403
    assert not actions.Collection.objects.filter(name="Unseen").exists()
    team.refresh_from_db()
    assert team.name == "Research"


def _conversation(alice, title: str, named, searched) -> Conversation:
    conversation = Conversation.objects.create(user=alice, title=title)
    conversation.collections.set(named)
    Message.objects.create(conversation=conversation, role="user", content=title)
    if searched is not None:
        Message.objects.create(
            conversation=conversation,
            role="assistant",
            content=f"answer to {title}",
            searched=[{"id": c.pk, "name": c.name, "version": 1} for c in searched],
        )
    return conversation


def test_a_limited_token_reads_only_conversations_about_its_collections(
    api, alice, private_collection, team_collection, limited
):
    _token, key = limited
    about_shared = _conversation(alice, "shared only", [team_collection], [team_collection])
    asked_all = _conversation(alice, "asked of all", [], [team_collection])
    mixed = [
        _conversation(alice, "secret kestrel", [private_collection], [private_collection]),
        _conversation(alice, "searched both", [], [team_collection, private_collection]),
        # the last question named the team's, an earlier answer searched the private one
        _conversation(alice, "earlier secret", [team_collection], [private_collection]),
        _conversation(alice, "not answered", [], None),
    ]
    listed = _as(api, key).get("/api/conversations/").json()["results"]
    assert sorted(item["id"] for item in listed) == sorted([about_shared.pk, asked_all.pk])
    for conversation in mixed:
        assert _as(api, key).get(f"/api/conversations/{conversation.pk}/").status_code == 404
        assert _as(api, key).delete(f"/api/conversations/{conversation.pk}/").status_code == 404
    assert _as(api, key).get(f"/api/conversations/{about_shared.pk}/").status_code == 200
    # her session, and an unlimited token, read them all
    api.credentials()
    api.force_login(alice)
    assert len(api.get("/api/conversations/").json()["results"]) == 6


def test_a_limited_token_reads_only_feedback_about_its_collections(
    api, alice, private_collection, team_collection, limited
):
    _token, key = limited
    items = {}
    for name, collections in (
        ("shared", [team_collection]),
        ("private", [private_collection]),
        ("both", [team_collection, private_collection]),
    ):
        conversation = _conversation(alice, f"feedback {name}", [], collections)
        answer = conversation.messages.get(role="assistant")
        feedback = Feedback.objects.create(
            message=answer, user=alice, rating="down", question=f"question {name}", answer=f"answer {name}"
        )
        feedback.collections.set(collections)
        items[name] = feedback
    listed = _as(api, key).get("/api/feedback/").json()["results"]
    assert [item["id"] for item in listed] == [items["shared"].pk]
    assert _as(api, key).get(f"/api/feedback/{items['private'].pk}/").status_code == 404
    assert _as(api, key).get(f"/api/feedback/{items['both'].pk}/").status_code == 404
    private_answer = items["private"].message_id
    assert _as(api, key).get(f"/api/messages/{private_answer}/feedback/").status_code == 404


def test_a_limited_token_reads_only_audit_entries_about_its_collections(
    api, alice, private_collection, team_collection, limited
):
    _token, key = limited
    actions.do_rename_collection(private_collection, "Kestrel plans", None)
    actions.do_rename_collection(team_collection, "Team handbook 2", None)
    entries = _as(api, key).get("/api/audit/").json()["results"]
    assert entries, "the team collection's entries are listed"
    assert {entry["collection_id"] for entry in entries} == {team_collection.pk}
    assert "Kestrel" not in str(entries)
    # the session sees the private one's and the token's creation too
    assert Entry.objects.filter(collection_id=private_collection.pk).exists()


def test_a_limited_token_has_no_memory(api, alice, limited, monkeypatch, settings):
    """Not through the API, and not in its answers: the memory is the account's, and may
    hold what was said about other collections."""
    token, key = limited
    assert _as(api, key).get("/api/memories/").status_code == 403
    assert _as(api, key).post("/api/memories/delete_all/").status_code in (403, 405)
    settings.MEMORY_ENABLED = True
    searched: list[object] = []

    class Memories:  # the memory store's adapter: who it was asked about
        def search(self, user, query):
            searched.append(user)
            return []

    monkeypatch.setattr(pipeline, "memories", Memories)
    conversation = Conversation.objects.create(user=alice)
    question = Message.objects.create(conversation=conversation, role="user", content="what do I prefer?")
    by_token = Session(still_signed_in(alice.pk, token.pk), "what do I prefer?", conversation, question, None, ())  # type: ignore[arg-type]
    by_session = Session(alice, "what do I prefer?", conversation, question, None, ())  # type: ignore[arg-type]
    assert pipeline._recall(by_token, "what do I prefer?") is None
    assert pipeline._recall(by_session, "what do I prefer?") == []
    assert searched == [alice]


def test_a_socket_keeps_the_token_after_its_checks(alice, limited, private_collection, team_collection):
    """The websockets' user, read again from the database at connect and after each change
    (knowledge.revocation.still_signed_in), still carries its token's limits."""
    token, _key = limited
    user = still_signed_in(alice.pk, token.pk)
    assert user is not None
    assert list(actions.Collection.objects.visible_to(user)) == [team_collection]
    session_user = still_signed_in(alice.pk)
    assert session_user is not None
    assert set(actions.Collection.objects.visible_to(session_user)) == {private_collection, team_collection}


def test_a_limited_token_searches_only_its_collections(api, alice, private_collection, limited):
    _token, key = limited
    response = _as(api, key).post(reverse("search"), {"query": "notes", "collections": [private_collection.pk]})
    assert response.status_code == 404
    response = _as(api, key).post(reverse("ask"), {"question": "notes?", "collections": [private_collection.pk]})
    assert response.status_code == 404

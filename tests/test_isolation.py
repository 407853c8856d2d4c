"""Every route, as anonymous and as charlie (no access), against alice's and her team's
objects: anonymous is sent to log in (pages) or gets 401 (API); charlie gets 404 for every
object route and never sees alice's data in a list. A route that is not classified here
fails the test, so new endpoints must join it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.urls import URLPattern, URLResolver, get_resolver

from assistant.memory.service import memories
from assistant.models import Conversation, Message
from knowledge import actions
from knowledge.models import Page, PageImage
from portal.routing import websocket_urlpatterns

# Routes anyone may open (allauth's own pages and the admin login are under their prefixes).
PUBLIC = {"healthz", "schema", "api-docs", "set_language"}
PUBLIC_PREFIXES = ("accounts/", "admin/")

# name -> the objects its URL arguments point at (alice's), or {} for a list.
PAGES: dict[str, dict[str, str]] = {
    "dashboard": {},
    "collection-create": {},
    "teams": {},
    "tokens": {},
    "collection": {"collection_id": "private"},
    "collection-rename": {"collection_id": "team_collection"},
    "collection-upload": {"collection_id": "private"},
    "collection-delete": {"collection_id": "team_collection"},
    "collection-settings": {"collection_id": "private"},
    "document": {"document_id": "document"},
    "document-page": {"document_id": "document", "number": "version_number"},  # 1: the fixture's page 1
    "document-delete": {"document_id": "document"},
    "document-rerun": {"document_id": "document"},
    "team": {"team_id": "team"},
    "member-role": {"team_id": "team", "membership_id": "membership"},
    "member-remove": {"team_id": "team", "membership_id": "membership"},
    "token-revoke": {"token_id": "token"},
    "my-memory": {},
    "my-memory-delete-all": {},
    "my-memory-edit": {"memory_id": "memory"},
    "my-memory-delete": {"memory_id": "memory"},
    "chat": {},
    "chat-conversation": {"conversation_id": "conversation"},
    "chat-delete": {"conversation_id": "conversation"},
}
API: dict[str, dict[str, str]] = {
    "api-root": {},
    "team-list": {},
    "collection-list": {},
    "token-list": {},
    "team-detail": {"pk": "team"},
    "collection-detail": {"pk": "private"},
    "token-detail": {"pk": "token"},
    "team-member-list": {"team_pk": "team"},
    "team-member-detail": {"team_pk": "team", "pk": "membership"},
    "collection-documents": {"collection_id": "private"},
    "collection-links": {"collection_id": "private"},
    "collection-versions": {"collection_id": "private"},
    "collection-reindex": {"collection_id": "private"},
    "collection-rollback": {"collection_id": "private"},
    "collection-version-activate": {"collection_id": "private", "number": "version_number"},
    "document-detail": {"pk": "document"},
    "document-pages": {"pk": "document"},
    "document-original": {"pk": "document"},
    "page-render": {"pk": "page"},
    "page-image": {"pk": "page", "sha256": "image"},
    "search": {},  # tests/assistant/test_retrieval.py: charlie never gets alice's chunks
    "ask": {},  # tests/assistant/test_answering.py, test_chat_socket.py: nor in an answer
    "conversation-list": {},
    "conversation-detail": {"pk": "conversation"},
    # tests/assistant/test_memory.py, test_memory_stack.py: nor in memory.used or answers
    "memory-list": {},
    "memory-export": {},
    "memory-delete-all": {},
    "memory-detail": {"pk": "memory"},
    "memory-history": {"pk": "memory"},
}
# tests/portal/test_stack.py: 4401 / 4404; tests/assistant/test_chat_socket.py: 4401, not_found
WEBSOCKETS = {"ws/collections/<int:collection_id>/", "ws/chat/"}
SECRETS = [
    "Alice&#x27;s notes",
    "Alice's notes",
    "Team handbook",
    "alice@example.com",
    "Research",
    "alice's question",
    "alice's memory",
]


def _routes(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), pattern.name or ""


def test_it_has_every_route_classified():
    unclassified = {
        (route, name)
        for route, name in _routes(get_resolver().url_patterns)
        if not route.startswith(PUBLIC_PREFIXES)
        and name not in PUBLIC | PAGES.keys() | API.keys()
        and not route.startswith("^static")
        and not route.startswith("^media")
    }
    assert unclassified == set(), "classify these routes in tests/test_isolation.py"
    assert {str(p.pattern) for p in websocket_urlpatterns} == WEBSOCKETS


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def objects(alice, bob, team, private_collection, team_collection) -> dict[str, Any]:
    token, _key = actions.do_create_token(alice, "alice's integration")
    document, _run = actions.do_add_document(private_collection, "Alice's notes.md", b"# Alice's notes\n\nsecret")
    page = Page.objects.create(
        document=document, number=1, kind="section", content_sha256="0" * 64, text="Alice's notes"
    )
    page.render.save("1.png", ContentFile(b"\x89PNG alice"))
    image = PageImage(page=page, sha256="a" * 64)
    image.file.save("a.png", ContentFile(b"\x89PNG alice's picture"))
    conversation = Conversation.objects.create(user=alice, title="alice's question")
    Message.objects.create(conversation=conversation, role="user", content="alice's question")
    memory = memories()._mem0.add("alice's memory: she prefers tables", user_id=str(alice.uid), infer=False)
    return {
        "memory": memory["results"][0]["id"],
        "conversation": conversation.pk,
        "image": image.sha256,
        "document": document.pk,
        "page": page.pk,
        "version_number": 1,
        "private": private_collection.pk,
        "team_collection": team_collection.pk,
        "team": team.pk,
        "membership": team.memberships.get(user=bob).pk,
        "token": token.pk,
    }


def _url(name: str, args: dict[str, str], objects: dict[str, Any]) -> str:
    from django.urls import reverse

    return reverse(name, kwargs={key: objects[value] for key, value in args.items()})


@pytest.mark.parametrize("name", sorted(PAGES))
def test_it_sends_anonymous_visitors_to_login(client, objects, name):
    url = _url(name, PAGES[name], objects)
    for response in (client.get(url), client.post(url)):
        assert response.status_code in (302, 405)
        if response.status_code == 302:
            assert response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("name", sorted(API))
def test_it_answers_401_to_anonymous_api_calls(api, objects, name):
    url = _url(name, API[name], objects)
    for method in ("get", "post", "patch", "delete"):
        response = getattr(api, method)(url)
        assert response.status_code in (401, 405), (method, url, response.status_code)
        assert not any(secret in response.content.decode() for secret in SECRETS)


@pytest.mark.parametrize(("name", "args"), sorted({**PAGES, **API}.items()))
def test_it_gives_charlie_404_or_nothing_of_alices(client, alice, charlie, objects, name, args):
    client.force_login(charlie)
    url = _url(name, args, objects)
    methods = ("get", "post", "patch", "delete") if name in API else ("get", "post")
    for method in methods:
        response = getattr(client, method)(url)
        body = response.content.decode()
        if args:  # an object of alice's: it does not exist for charlie
            assert response.status_code in (404, 405), (method, url, response.status_code)
        assert not any(secret in body for secret in SECRETS), (method, url)
    assert actions.Collection.objects.filter(pk=objects["private"]).exists()
    assert actions.ApiToken.objects.get(pk=objects["token"]).revoked_at is None
    assert actions.Document.objects.filter(pk=objects["document"]).exists()
    assert Conversation.objects.filter(pk=objects["conversation"]).exists()
    assert memories().get(alice, objects["memory"]).text == "alice's memory: she prefers tables"

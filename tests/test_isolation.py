"""The isolation matrix: every route × every kind of caller.

Callers: anonymous, alice (the owner), bob as a viewer and as an editor of alice's team
(by session and by API token), and charlie (no access; session and token). Objects: alice's
private collection with a document, a page, its render and a picture, the same in her
team's collection, and her own conversation, memory, token and team membership.

- anonymous: pages send to the login page, the API answers 401;
- alice: every object URL resolves (200, or 405 for a POST-only route), so the 404s below
  are about access and not about a wrong URL;
- charlie, and bob on alice's private objects: 404 for every object route, never any of
  alice's data in a body (lists, errors, search, memory, run errors);
- bob on the team's objects: reads what members may read; a viewer's writes are 403, an
  editor's writes go through, and only a team admin manages;
- an API token authenticates the API and websockets, never pages;
- media are only served through the access-checked routes above;
- a token limited to one collection (alice's own): her other collection is a 404, the
  account's management a 403, her per-user lists hold nothing else (tests/knowledge/
  test_limited_tokens.py: with conversations, feedback and audit entries about both);
- websockets: 4401 anonymous, 4404 for a collection the caller (or its token) cannot see
  (tests/test_isolation_sockets.py).

A route that is not classified here fails the test, so new endpoints must join it. alice's
objects are made once per module and process (`world`); each test runs in a savepoint of
that transaction, rolled back after it, as Django's TestCase does with setUpTestData. The MCP
server at /mcp/ is not a Django route: its tools are held to the same rules, with another
user's token, in tests/agents/test_mcp.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.db import transaction
from django.test import override_settings
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from assistant.memory.service import memories
from assistant.models import Conversation, Message
from ingestion.actions import do_add_document
from knowledge import actions
from knowledge.models import Document, IndexVersion, Page, PageImage, Role, Team
from knowledge.principal import limited_message
from portal.routing import websocket_urlpatterns
from quality.models import EvaluationRun, Feedback, GoldenQuestion
from sources.actions import do_save_source
from sources.models import Source, SyncRun
from sources.remotes import Credentials
from tests.conftest import make_collection, make_user, set_role

# Routes anyone may open (allauth's own pages and the admin login are under their prefixes).
PUBLIC = {"healthz", "favicon", "schema", "api-docs", "set_language"}
PUBLIC_PREFIXES = ("accounts/", "admin/")
# For the operator's monitoring, not for users: the metrics token or an allowed address, no
# session or API token (tests/operations/test_metrics.py).
OPERATOR = {"metrics"}


class Access(Enum):
    OWN = "own"  # the caller's own things: a list of them, or one of them (404 for others)
    READ = "read"  # anyone who can see the collection or team reads it
    WRITE = "write"  # an editor changes the collection's documents
    MANAGE = "manage"  # the owner or a team admin changes the collection or team itself


# name -> (URL arguments: object keys; access). "collection", "document", "page" and
# "image", "source" and "sync_run" are alice's private ones or her team's (both are tried);
# the rest are hers alone.
PAGES: dict[str, tuple[dict[str, str], Access]] = {
    "dashboard": ({}, Access.OWN),
    "collection-create": ({}, Access.OWN),
    "teams": ({}, Access.OWN),
    "tokens": ({}, Access.OWN),
    "collection": ({"collection_id": "collection"}, Access.READ),
    "collection-rename": ({"collection_id": "collection"}, Access.WRITE),
    "collection-upload": ({"collection_id": "collection"}, Access.WRITE),
    "collection-delete": ({"collection_id": "collection"}, Access.MANAGE),
    "collection-settings": ({"collection_id": "collection"}, Access.MANAGE),
    "document": ({"document_id": "document"}, Access.READ),
    "document-page": ({"document_id": "document", "number": "page_number"}, Access.READ),
    "document-delete": ({"document_id": "document"}, Access.WRITE),
    "document-rerun": ({"document_id": "document"}, Access.WRITE),
    "team": ({"team_id": "team"}, Access.READ),
    "member-role": ({"team_id": "team", "membership_id": "membership"}, Access.MANAGE),
    "member-remove": ({"team_id": "team", "membership_id": "membership"}, Access.MANAGE),
    "token-revoke": ({"token_id": "token"}, Access.OWN),
    "invitations": ({}, Access.OWN),
    "accept-invitation": ({"invitation_id": "invitation"}, Access.OWN),
    "decline-invitation": ({"invitation_id": "invitation"}, Access.OWN),
    "resend-invitation": ({"team_id": "team", "invitation_id": "team_invitation"}, Access.MANAGE),
    "revoke-invitation": ({"team_id": "team", "invitation_id": "team_invitation"}, Access.MANAGE),
    "my-memory": ({}, Access.OWN),
    "my-memory-delete-all": ({}, Access.OWN),
    "my-memory-edit": ({"memory_id": "memory"}, Access.OWN),
    "my-memory-delete": ({"memory_id": "memory"}, Access.OWN),
    "chat": ({}, Access.OWN),
    "chat-conversation": ({"conversation_id": "conversation"}, Access.OWN),
    "chat-delete": ({"conversation_id": "conversation"}, Access.OWN),
    # the audit entries the caller may read: tests/audit/test_log.py
    "audit": ({}, Access.OWN),
    "collection-quality": ({"collection_id": "collection"}, Access.READ),
    "collection-quality-plot": ({"collection_id": "collection"}, Access.READ),
    "collection-evaluate": ({"collection_id": "collection"}, Access.MANAGE),
    "collection-flip-anyway": ({"collection_id": "collection", "number": "held_number"}, Access.MANAGE),
    "collection-feedback": ({"collection_id": "collection"}, Access.MANAGE),
    "my-feedback": ({}, Access.OWN),
    "collection-golden": ({"collection_id": "collection"}, Access.READ),  # POST adds: manage
    "collection-golden-import": ({"collection_id": "collection"}, Access.MANAGE),
    "collection-golden-export": ({"collection_id": "collection"}, Access.MANAGE),
    "golden-edit": ({"collection_id": "collection", "golden_id": "golden"}, Access.MANAGE),
    "golden-delete": ({"collection_id": "collection", "golden_id": "golden"}, Access.MANAGE),
    # alice's feedback on her private collection: the test is made in a collection she manages
    "feedback-to-golden": ({"feedback_id": "feedback"}, Access.OWN),
    "collection-analytics": ({"collection_id": "collection"}, Access.MANAGE),
    "team-analytics": ({"team_id": "team"}, Access.MANAGE),
    # sources hold addresses and credentials: only those who manage the collection see them
    "collection-sources": ({"collection_id": "collection"}, Access.MANAGE),
    "source": ({"source_id": "source"}, Access.MANAGE),
    "source-sync": ({"source_id": "source"}, Access.MANAGE),
    "source-delete": ({"source_id": "source"}, Access.MANAGE),
}
API: dict[str, tuple[dict[str, str], Access]] = {
    "api-root": ({}, Access.OWN),
    "team-list": ({}, Access.OWN),
    "collection-list": ({}, Access.OWN),
    "token-list": ({}, Access.OWN),
    "team-detail": ({"pk": "team"}, Access.READ),
    "collection-detail": ({"pk": "collection"}, Access.READ),
    "token-detail": ({"pk": "token"}, Access.OWN),
    "team-member-list": ({"team_pk": "team"}, Access.READ),
    "team-member-detail": ({"team_pk": "team", "pk": "membership"}, Access.MANAGE),
    "team-invitation-list": ({"team_pk": "team"}, Access.MANAGE),
    "team-invitation-detail": ({"team_pk": "team", "pk": "team_invitation"}, Access.MANAGE),
    "team-invitation-resend": ({"team_pk": "team", "pk": "team_invitation"}, Access.MANAGE),
    # alice's own invitation (to another team): only she answers it
    "invitation-list": ({}, Access.OWN),
    "invitation-detail": ({"pk": "invitation"}, Access.OWN),
    "invitation-accept": ({"pk": "invitation"}, Access.OWN),
    "invitation-decline": ({"pk": "invitation"}, Access.OWN),
    "collection-documents": ({"collection_id": "collection"}, Access.READ),
    "collection-links": ({"collection_id": "collection"}, Access.WRITE),
    "collection-versions": ({"collection_id": "collection"}, Access.READ),
    "collection-reindex": ({"collection_id": "collection"}, Access.MANAGE),
    "collection-rollback": ({"collection_id": "collection"}, Access.MANAGE),
    "collection-version-activate": ({"collection_id": "collection", "number": "version_number"}, Access.MANAGE),
    "document-detail": ({"pk": "document"}, Access.READ),
    "document-pages": ({"pk": "document"}, Access.READ),
    "document-original": ({"pk": "document"}, Access.READ),
    "document-rerun-api": ({"pk": "document"}, Access.WRITE),
    "page-render": ({"pk": "page"}, Access.READ),
    "page-image": ({"pk": "page", "sha256": "image"}, Access.READ),
    # The bodies: tests/assistant/test_retrieval.py (charlie never gets alice's chunks, even
    # ranked first), test_answering.py and test_chat_socket.py (nor in an answer).
    "search": ({}, Access.OWN),
    "ask": ({}, Access.OWN),
    # OpenAI-compatible: the models are the caller's collections; tests/agents/test_completions.py
    "openai-models": ({}, Access.OWN),
    "openai-chat-completions": ({}, Access.OWN),
    "conversation-list": ({}, Access.OWN),
    "conversation-detail": ({"pk": "conversation"}, Access.OWN),
    # tests/assistant/test_memory.py, test_memory_stack.py: nor in memory.used or answers
    "memory-list": ({}, Access.OWN),
    "memory-export": ({}, Access.OWN),
    "memory-delete-all": ({}, Access.OWN),
    "memory-detail": ({"pk": "memory"}, Access.OWN),
    "memory-history": ({"pk": "memory"}, Access.OWN),
    "audit-list": ({}, Access.OWN),
    "collection-evaluation-list": ({"collection_id": "collection"}, Access.READ),
    "collection-evaluation-detail": ({"collection_id": "collection", "pk": "evaluation"}, Access.READ),
    # alice's feedback on her answer (in her private collection): hers to give, change and withdraw
    "message-feedback": ({"message_id": "message"}, Access.OWN),
    "feedback-list": ({}, Access.OWN),
    "feedback-detail": ({"pk": "feedback"}, Access.OWN),
    "collection-golden-list": ({"collection_id": "collection"}, Access.READ),  # POST adds: manage
    "collection-golden-detail": ({"collection_id": "collection", "pk": "golden"}, Access.READ),  # writes: manage
    "collection-golden-import-api": ({"collection_id": "collection"}, Access.MANAGE),
    "collection-golden-export-api": ({"collection_id": "collection"}, Access.MANAGE),
    "feedback-golden": ({"pk": "feedback"}, Access.OWN),
    "collection-analytics-api": ({"collection_id": "collection"}, Access.MANAGE),
    "team-analytics-api": ({"team_id": "team"}, Access.MANAGE),
    "collection-source-list": ({"collection_id": "collection"}, Access.MANAGE),
    "source-detail": ({"pk": "source"}, Access.MANAGE),
    "source-sync-api": ({"pk": "source"}, Access.MANAGE),
    "source-run-list": ({"pk": "source"}, Access.MANAGE),
    "source-run-detail": ({"pk": "source", "run_id": "sync_run"}, Access.MANAGE),
}
ROUTES = {**PAGES, **API}
WEBSOCKETS = {"ws/collections/<int:collection_id>/", "ws/chat/"}
# What only alice can know (her private collection, document, page, run error, picture,
# conversation, memory, token name); bob may see the team's names, charlie nothing.
PRIVATE_SECRETS = [
    "Alice&#x27;s notes",
    "Alice's notes",
    "alice-private-text",
    "alice's run failed",
    "alice's question",
    "alice's memory",
    "alice's integration",
    "Guild of Erin",
]
TEAM_SECRETS = ["Team handbook", "team-text", "Research", "alice@example.com"]
READ_METHODS = ("get",)
WRITE_METHODS = ("post", "patch", "delete")


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
        if not route.startswith(PUBLIC_PREFIXES) and name not in PUBLIC | OPERATOR | ROUTES.keys()
    }
    assert unclassified == set(), "classify these routes in tests/test_isolation.py"
    assert {str(p.pattern) for p in websocket_urlpatterns} == WEBSOCKETS


def _document(collection, name: str, text: str) -> dict[str, Any]:
    document, _run = do_add_document(collection, name, f"# {name}\n\n{text}".encode(), enqueue=False)
    Document.objects.filter(pk=document.pk).update(error=f"{text}: alice's run failed" if "alice" in text else "")
    page = Page.objects.create(document=document, number=1, kind="section", content_sha256="0" * 64, text=text)
    page.render.save("1.png", ContentFile(b"\x89PNG " + text.encode()))
    image = PageImage(page=page, sha256=("a" if "alice" in text else "b") * 64)
    image.file.save("a.png", ContentFile(b"\x89PNG picture of " + text.encode()))
    golden = GoldenQuestion.objects.create(
        collection=collection, key=f"{text}-1", question=f"What does {text} say?", lang="en", gold=[{"file": name}]
    )
    version = IndexVersion.objects.create(
        collection=collection, number=9, embedder_id="test", dims=4, config_hash="", status="held"
    )
    evaluation = EvaluationRun.objects.create(
        collection=collection, version=version, version_number=version.number, error=f"{text} evaluation"
    )
    source = Source(collection=collection, name=f"{text} source", kind="s3", bucket=f"{text}-bucket")
    do_save_source(source, credentials=Credentials(f"{text}-key", f"{text}-secret"))
    sync_run = SyncRun.objects.create(source=source, status="failed", error=f"{text}: the bucket is gone")
    return {
        "source": source.pk,
        "sync_run": sync_run.pk,
        "collection": collection.pk,
        "document": document.pk,
        "page": page.pk,
        "image": image.sha256,
        "golden": golden.pk,
        "evaluation": evaluation.pk,
    }


@dataclass
class World:
    """alice, bob (a viewer of her team), the team and alice's objects (her two collections:
    "private" and "shared")."""

    alice: Any
    bob: Any
    team: Team
    objects: dict[str, Any]


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[World]:
    """Made once for the module's ~570 tests (each made them anew before: a third of the
    module's time), in a transaction rolled back at the module's end; the files they store
    go to a MEDIA_ROOT of the module's own."""
    media = tmp_path_factory.mktemp("isolation") / "media"
    with override_settings(MEDIA_ROOT=media), django_db_blocker.unblock(), transaction.atomic():
        alice, bob = make_user("alice"), make_user("bob")
        team = actions.do_create_team(alice, "Research")
        actions.do_add_member(team, bob, Role.VIEWER)
        private_collection = make_collection(alice, "Alice's notes")
        team_collection = make_collection(alice, "Team handbook", team=team)
        token, _key = actions.do_create_token(alice, "alice's integration")
        erin = make_user("erin")
        invitation = actions.do_invite(actions.do_create_team(erin, "Guild of Erin"), alice.email, Role.EDITOR, erin)
        team_invitation = actions.do_invite(team, "frank@example.com", Role.VIEWER, alice)
        conversation = Conversation.objects.create(user=alice, title="alice's question")
        Message.objects.create(conversation=conversation, role="user", content="alice's question")
        answer = Message.objects.create(conversation=conversation, role="assistant", content="alice's answer")
        feedback = Feedback.objects.create(
            message=answer, user=alice, rating="down", question="alice's question", answer="alice's answer"
        )
        feedback.collections.add(private_collection)
        objects = {
            "private": _document(private_collection, "Alice's notes.md", "alice-private-text"),
            "shared": _document(team_collection, "Team handbook.md", "team-text"),
            "conversation": conversation.pk,
            "message": answer.pk,
            "feedback": feedback.pk,
            "page_number": 1,
            "version_number": 1,
            "held_number": 9,
            "team": team.pk,
            "membership": team.memberships.get(user=bob).pk,
            "token": token.pk,
            "invitation": invitation.pk,
            "team_invitation": team_invitation.pk,
        }
        yield World(alice, bob, team, objects)
        transaction.set_rollback(True)


# The conftest's fixtures of the same names, taken from the world (fresh from the database:
# a test's writes are rolled back with its savepoint, not in the objects it was given).


@pytest.fixture
def alice(world, db):
    return get_user_model().objects.get(pk=world.alice.pk)


@pytest.fixture
def bob(world, db):
    return get_user_model().objects.get(pk=world.bob.pk)


@pytest.fixture
def team(world, db) -> Team:
    return Team.objects.get(pk=world.team.pk)


@pytest.fixture
def objects(request, world, db, alice) -> dict[str, Any]:
    # A memory costs an embedding: only the memory routes' tests get one. mem0 writes through
    # its own connection, outside the test's transaction: each of those tests adds its own.
    memory_id = str(uuid.UUID(int=0))
    if "memory" in getattr(getattr(request.node, "callspec", None), "params", {}).get("name", "memory"):
        added = memories()._mem0.add("alice's memory: she prefers tables", user_id=str(alice.uid), infer=False)
        memory_id = added["results"][0]["id"]
    return {**world.objects, "memory": memory_id}


def _url(name: str, objects: dict[str, Any], where: str = "private") -> str:
    """The route's URL for alice's private objects, or for those shared with her team."""
    args, _access = ROUTES[name]
    return reverse(name, kwargs={key: objects[where].get(value, objects.get(value)) for key, value in args.items()})


def _methods(name: str) -> tuple[str, ...]:
    return READ_METHODS + WRITE_METHODS if name in API else ("get", "post")


def _nothing_of(response: Any, secrets: list[str]) -> bool:
    body = b"".join(response.streaming_content) if response.streaming else response.content
    text = body.decode(errors="replace")
    return not any(secret in text for secret in secrets)


def _alices_things_are_intact(alice, objects: dict[str, Any]) -> None:
    for where in ("private", "shared"):
        assert Document.objects.filter(pk=objects[where]["document"]).exists()
        assert actions.Collection.objects.filter(pk=objects[where]["collection"]).exists()
        assert Source.objects.filter(pk=objects[where]["source"]).exists()
    assert actions.ApiToken.objects.get(pk=objects["token"]).revoked_at is None
    for invitation in ("invitation", "team_invitation"):
        assert actions.Invitation.objects.get(pk=objects[invitation]).status == "pending"
    assert not actions.Membership.objects.filter(team__name="Guild of Erin", user=alice).exists()
    assert Conversation.objects.filter(pk=objects["conversation"]).exists()
    if objects["memory"] != str(uuid.UUID(int=0)):
        assert memories().get(alice, objects["memory"]).text == "alice's memory: she prefers tables"


@pytest.mark.parametrize("name", sorted(PAGES))
def test_it_sends_anonymous_visitors_to_login(client, objects, name):
    url = _url(name, objects)
    for response in (client.get(url), client.post(url)):
        assert response.status_code in (302, 405)
        if response.status_code == 302:
            assert response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("name", sorted(API))
def test_it_answers_401_to_anonymous_api_calls(api, objects, name):
    url = _url(name, objects)
    for method in _methods(name):
        response = getattr(api, method)(url)
        assert response.status_code in (401, 405), (method, url, response.status_code)
        assert _nothing_of(response, PRIVATE_SECRETS + TEAM_SECRETS)


@pytest.mark.parametrize("name", sorted(OPERATOR))
def test_no_user_opens_the_operators_routes(client, api, alice, objects, name):
    """Not anonymous, not alice by session or API token, not staff: from an address that is
    not allowed, only the metrics token opens them (they hold no user's data either way)."""
    url, outside = reverse(name), "203.0.113.9"
    staff = make_user("staff", is_staff=True, is_superuser=True)
    assert client.get(url, REMOTE_ADDR=outside).status_code == 403
    for user in (alice, staff):
        client.force_login(user)
        assert client.get(url, REMOTE_ADDR=outside).status_code == 403
    _token, key = actions.do_create_token(alice, "isolation")
    for scheme in ("Token", "Bearer"):
        response = api.get(url, REMOTE_ADDR=outside, HTTP_AUTHORIZATION=f"{scheme} {key}")
        assert response.status_code == 403, scheme
        assert b"portal_" not in response.content


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_every_url_resolves_for_alice(client, alice, objects, name):
    """The objects exist for their owner, so the 404s of the other tests mean 'not yours'."""
    client.force_login(alice)
    for where in ("private", "shared"):
        response = client.get(_url(name, objects, where))
        assert response.status_code in (200, 405), (name, where, response.status_code)


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_it_gives_charlie_404_or_nothing_of_alices(client, api, alice, charlie, objects, name):
    args, _access = ROUTES[name]
    for caller in _callers(client, api, charlie, name):
        for where in ("private", "shared"):
            url = _url(name, objects, where)
            for method in _methods(name):
                response = getattr(caller, method)(url)
                if args:  # an object of alice's: it does not exist for charlie
                    assert response.status_code in (404, 405), (method, url, response.status_code)
                assert _nothing_of(response, PRIVATE_SECRETS + TEAM_SECRETS), (method, url)
    _alices_things_are_intact(alice, objects)


@pytest.mark.parametrize("name", sorted(ROUTES))
@pytest.mark.parametrize("role", [Role.VIEWER, Role.EDITOR])
def test_bob_reads_the_team_by_role_and_nothing_private(client, api, alice, bob, team, objects, name, role):
    set_role(team, bob, role)
    args, access = ROUTES[name]
    for caller in _callers(client, api, bob, name):
        per_collection = {"collection", "document", "page", "image", "source"}
        if set(args.values()) & per_collection or (args and access is Access.OWN):
            for method in _methods(name):  # alice's private objects and her own: as for charlie
                response = getattr(caller, method)(_url(name, objects, "private"))
                assert response.status_code in (404, 405), (method, name, response.status_code)
                assert _nothing_of(response, PRIVATE_SECRETS), (method, name)
        url = _url(name, objects, "shared")
        if access is Access.READ:
            response = caller.get(url)
            assert response.status_code == 200, (name, response.status_code)
            assert _nothing_of(response, PRIVATE_SECRETS), name
        if access is Access.MANAGE or (args and access is not Access.OWN and role is Role.VIEWER):
            for method in _methods(name):
                response = getattr(caller, method)(url)
                if method != "get":
                    assert response.status_code in (403, 405), (method, name, response.status_code)
                assert _nothing_of(response, PRIVATE_SECRETS), (method, name)
        if access is Access.OWN and not args:  # a list of the caller's own things
            for method in _methods(name):
                assert _nothing_of(getattr(caller, method)(url), PRIVATE_SECRETS), (method, name)
    _alices_things_are_intact(alice, objects)


@pytest.mark.parametrize("name", sorted(n for n, (args, access) in ROUTES.items() if access is Access.WRITE))
def test_an_editor_writes_the_teams_documents(client, bob, team, objects, name):
    """The other side of the viewer's 403: the same request by an editor is not refused."""
    set_role(team, bob, Role.EDITOR)
    client.force_login(bob)
    response = client.post(_url(name, objects, "shared"))
    assert response.status_code not in (401, 403, 404, 405), (name, response.status_code)
    assert response.status_code < 500


@pytest.mark.parametrize("name", sorted(PAGES))
def test_an_api_token_does_not_open_pages(client, alice, objects, name):
    _token, key = actions.do_create_token(alice, "tests")
    for method in ("get", "post"):
        response = getattr(client, method)(_url(name, objects), HTTP_AUTHORIZATION=f"Token {key}")
        assert response.status_code in (302, 405), (method, name, response.status_code)
        if response.status_code == 302:
            assert response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("name", sorted(API))
def test_a_token_limited_to_one_collection_reaches_nothing_else(api, alice, objects, name):
    """The limited-token column: alice's own token (not read-only), limited to her team's
    collection. Her private collection and all in it is a 404, as if it did not exist; what
    manages the account (tokens, teams, invitations, sources, memory) is a 403 before it
    runs, whatever the object; her per-user lists (conversations, feedback, audit) hold
    nothing of her other collection; the team's collection reads as it does for her."""
    shared = actions.Collection.objects.get(pk=objects["shared"]["collection"])
    _token, key = actions.do_create_token(alice, "limited", collections=[shared])
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    args, access = ROUTES[name]
    per_collection = {"collection", "document", "page", "image", "source", "sync_run", "evaluation", "golden"}
    for method in _methods(name):
        response = getattr(api, method)(_url(name, objects, "private"))
        if args:  # an object of her other collection, or of the account
            assert response.status_code in (403, 404, 405), (method, name, response.status_code)
        assert response.status_code < 500, (method, name, response.status_code)
        if response.status_code == 403:  # refused for what the token is, not for the object
            assert response.json()["detail"] == limited_message(), (method, name)
        assert _nothing_of(response, PRIVATE_SECRETS), (method, name)
    if set(args.values()) & per_collection and access is Access.READ:
        response = api.get(_url(name, objects, "shared"))
        assert response.status_code == 200, (name, response.status_code)
        assert _nothing_of(response, PRIVATE_SECRETS), name
    _alices_things_are_intact(alice, objects)


def _callers(client, api, user, name: str) -> list[Any]:
    """Clients for `user`: by session, and for the API by token too (pages take sessions
    only: test_an_api_token_does_not_open_pages)."""
    client.force_login(user)
    if name in PAGES:
        return [client]
    _token, key = actions.do_create_token(user, "tests")
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return [client, api]


def test_media_files_are_served_only_through_checked_routes(client, alice, objects):
    """MEDIA_URL is not a route: a render's or original's storage path gives 404 even to its
    owner, in any DEBUG setting (the URLconf is the same)."""
    client.force_login(alice)
    page = Page.objects.get(pk=objects["private"]["page"])
    document = page.document
    for path in (page.render.name, document.file.name):
        assert client.get(django_settings.MEDIA_URL + path).status_code == 404
    assert client.get(reverse("page-render", kwargs={"pk": page.pk})).status_code == 200

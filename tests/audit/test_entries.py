"""Every recorded action leaves exactly one audit entry, with who, what and where; an action
that fails leaves none (the entry is written in the action's own transaction).

The logins and lockouts are tested in tests/portal/test_admin_login.py; what each user may
read of the log in tests/audit/test_log.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import DatabaseError
from django.utils import timezone

from assistant.memory.errors import MemoryAccessError
from assistant.memory.service import memories
from assistant.models import Conversation, Message
from audit.log import acting_as
from audit.models import Action, Entry
from ingestion import actions as ingest
from ingestion.index import create_version
from ingestion.versions import flip
from knowledge import actions
from knowledge.models import ApiToken, Collection, Document, IndexedDocument, IndexVersion, Invitation, Role, Team
from providers import registry
from quality import actions as quality
from quality.models import Feedback, GoldenQuestion
from tests.conftest import make_collection

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]


@dataclass
class World:
    alice: Any
    bob: Any
    charlie: Any
    team: Any
    collection: Collection  # the team's, with one document served by its active version v1
    document: Document
    active: IndexVersion


@pytest.fixture
def world(alice, bob, charlie, team) -> World:
    collection = make_collection(alice, "Team handbook", team=team)
    document, _run = ingest.do_add_document(collection, "guide.md", b"# Guide\n\nHello.", enqueue=False)
    active = create_version(collection, registry.text_embedder(), status=IndexVersion.Status.BUILDING)
    IndexedDocument.objects.create(index_version=active, document=document, sha256=document.sha256)
    flip(collection, active)
    collection.refresh_from_db()
    return World(alice, bob, charlie, team, collection, document, active)


def _membership(w: World, user: Any):
    return w.team.memberships.get(user=user)


def _built(w: World) -> IndexVersion:
    """A second version, built and retired (v2 active, v1 retired after this)."""
    version = create_version(w.collection, registry.text_embedder(), status=IndexVersion.Status.BUILDING)
    flip(w.collection, version)
    return version


def _invitation(w: World, **changes: Any) -> Invitation:
    invitation = actions.do_invite(w.team, "charlie@example.com", Role.VIEWER, w.alice)
    Invitation.objects.filter(pk=invitation.pk).update(**changes)
    invitation.refresh_from_db()
    return invitation


def _golden(w: World) -> GoldenQuestion:
    """A golden question of the collection, made without an entry of its own."""
    return GoldenQuestion.objects.create(
        collection=w.collection, key="known", question="What is in it?", lang="en", gold=[{"file": "guide.md"}]
    )


def _feedback(w: World, **fields: Any) -> Feedback:
    """Alice's feedback on an answer that searched the collection."""
    conversation = Conversation.objects.create(user=w.alice, title="guide")
    answer = Message.objects.create(conversation=conversation, role="assistant", content="Hello.")
    feedback = Feedback.objects.create(
        message=answer, user=w.alice, rating="down", question="What does the guide say?", **fields
    )
    feedback.collections.add(w.collection)
    return feedback


GOLDEN_LINE = json.dumps(
    {"id": "imported", "question": "What does it say?", "lang": "en", "type": "fact", "gold": [{"file": "guide.md"}]}
)


def _failing(model: type, method: str) -> Callable[[pytest.MonkeyPatch], None]:
    """Make `model.method` fail as a lost database connection would, after the entry is written."""

    def patch(monkeypatch: pytest.MonkeyPatch) -> None:
        def fail(*args: Any, **kwargs: Any) -> None:
            raise DatabaseError("connection lost")

        monkeypatch.setattr(model, method, fail)

    return patch


# action -> (setup returning the thing to act on, the action, a failing variant: setup + action
# that must raise, and an optional monkeypatch that makes the action fail midway)
CASES: dict[Action, tuple[Callable[[World], Any], Callable[[World, Any], Any], Any]] = {
    Action.TEAM_CREATE: (
        lambda w: None,
        lambda w, _: actions.do_create_team(w.alice, "Another team"),
        (lambda w: None, lambda w, _: actions.do_create_team(w.alice, "research"), None),
    ),
    Action.TEAM_UPDATE: (
        lambda w: w.team,
        lambda w, t: actions.do_update_team(t, name="Research lab"),
        (
            lambda w: (actions.do_create_team(w.charlie, "Guild"), w.team)[1],
            lambda w, t: actions.do_update_team(t, name="GUILD"),
            None,
        ),
    ),
    Action.TEAM_DELETE: (
        lambda w: actions.do_create_team(w.alice, "Empty team"),  # no collection: one entry
        lambda w, t: actions.do_delete_team(t),
        (lambda w: w.team, lambda w, t: actions.do_delete_team(t), _failing(Team, "delete")),
    ),
    Action.MEMBER_ADD: (
        lambda w: None,
        lambda w, _: actions.do_add_member(w.team, w.charlie, Role.VIEWER),
        (lambda w: None, lambda w, _: actions.do_add_member(w.team, w.bob, Role.VIEWER), None),
    ),
    Action.MEMBER_ROLE: (
        lambda w: _membership(w, w.bob),
        lambda w, m: actions.do_change_role(m, Role.EDITOR),
        (lambda w: _membership(w, w.alice), lambda w, m: actions.do_change_role(m, Role.VIEWER), None),
    ),
    Action.MEMBER_REMOVE: (
        lambda w: _membership(w, w.bob),
        lambda w, m: actions.do_remove_member(m),
        (lambda w: _membership(w, w.alice), lambda w, m: actions.do_remove_member(m), None),
    ),
    Action.INVITATION_CREATE: (
        lambda w: None,
        lambda w, _: actions.do_invite(w.team, "charlie@example.com", Role.EDITOR, w.alice),
        (lambda w: None, lambda w, _: actions.do_invite(w.team, "bob@example.com", Role.EDITOR, w.alice), None),
    ),
    Action.INVITATION_RESEND: (
        _invitation,
        lambda w, i: actions.do_resend_invitation(i),
        (lambda w: _invitation(w, status="revoked"), lambda w, i: actions.do_resend_invitation(i), None),
    ),
    Action.INVITATION_REVOKE: (
        _invitation,
        lambda w, i: actions.do_revoke_invitation(i),
        (lambda w: _invitation(w, status="declined"), lambda w, i: actions.do_revoke_invitation(i), None),
    ),
    Action.INVITATION_ACCEPT: (
        _invitation,
        lambda w, i: actions.do_accept_invitation(i, w.charlie),
        (
            lambda w: _invitation(w, expires_at=timezone.now() - timedelta(days=1)),
            lambda w, i: actions.do_accept_invitation(i, w.charlie),
            None,
        ),
    ),
    Action.INVITATION_DECLINE: (
        _invitation,
        lambda w, i: actions.do_decline_invitation(i),
        (lambda w: _invitation(w, status="accepted"), lambda w, i: actions.do_decline_invitation(i), None),
    ),
    Action.COLLECTION_CREATE: (
        lambda w: None,
        lambda w, _: actions.do_create_collection(w.alice, "Another", team=w.team),
        (lambda w: None, lambda w, _: actions.do_create_collection(w.alice, "Team handbook", team=w.team), None),
    ),
    Action.COLLECTION_RENAME: (
        lambda w: make_collection(w.alice, "Drafts", team=w.team),
        lambda w, c: actions.do_rename_collection(c, "Final"),
        (
            lambda w: make_collection(w.alice, "Drafts", team=w.team),
            lambda w, c: actions.do_rename_collection(c, "Team handbook"),
            None,
        ),
    ),
    Action.COLLECTION_SETTINGS: (
        lambda w: w.collection,
        lambda w, c: actions.do_change_collection_settings(c, {"chunk_size": 300}),
        (
            lambda w: w.collection,
            lambda w, c: actions.do_change_collection_settings(c, {"chunk_size": 300}),
            _failing(Collection, "save"),
        ),
    ),
    Action.COLLECTION_DELETE: (
        lambda w: w.collection,
        lambda w, c: actions.do_delete_collection(c),
        (lambda w: w.collection, lambda w, c: actions.do_delete_collection(c), _failing(Collection, "delete")),
    ),
    Action.DOCUMENT_UPLOAD: (
        lambda w: None,
        lambda w, _: ingest.do_add_document(w.collection, "new.md", b"# New", enqueue=False),
        (
            lambda w: None,
            lambda w, _: ingest.do_add_document(w.collection, "x.exe", b"MZ\x90\x00", enqueue=False),
            None,
        ),
    ),
    Action.DOCUMENT_REPLACE: (
        lambda w: None,
        lambda w, _: ingest.do_add_document(w.collection, "guide.md", b"# Guide\n\nBye.", enqueue=False),
        (
            lambda w: None,
            lambda w, _: ingest.do_add_document(w.collection, "guide.md", b"# Guide\n\nBye.", enqueue=False),
            _failing(Document, "save"),
        ),
    ),
    Action.DOCUMENT_DELETE: (
        lambda w: w.document,
        lambda w, d: actions.do_delete_document(d),
        (lambda w: w.document, lambda w, d: actions.do_delete_document(d), _failing(Document, "delete")),
    ),
    Action.INDEX_REINDEX: (
        lambda w: None,
        lambda w, _: ingest.do_reindex(w.collection, enqueue=False),
        (lambda w: ingest.do_reindex(w.collection, enqueue=False), lambda w, _: ingest.do_reindex(w.collection), None),
    ),
    Action.INDEX_FLIP: (
        lambda w: create_version(w.collection, registry.text_embedder(), status=IndexVersion.Status.BUILDING),
        lambda w, v: flip(w.collection, v),
        (
            lambda w: (
                create_version(w.collection, registry.text_embedder(), status=IndexVersion.Status.BUILDING),
                make_collection(w.alice, "Elsewhere"),
            ),
            lambda w, pair: flip(pair[1], pair[0]),
            None,
        ),
    ),
    Action.INDEX_ACTIVATE: (
        lambda w: (_built(w), IndexVersion.objects.get(pk=w.active.pk))[1],
        lambda w, v: ingest.do_activate_version(v),
        (
            lambda w: create_version(w.collection, registry.text_embedder(), status=IndexVersion.Status.BUILDING),
            lambda w, v: ingest.do_activate_version(v),
            None,
        ),
    ),
    Action.INDEX_ROLLBACK: (
        _built,
        lambda w, _: ingest.do_roll_back(w.collection),
        (lambda w: None, lambda w, _: ingest.do_roll_back(w.collection), None),
    ),
    Action.INDEX_FLIP_ANYWAY: (
        lambda w: create_version(w.collection, registry.text_embedder(), status=IndexVersion.Status.HELD),
        lambda w, v: ingest.do_activate_version(v),
        (
            lambda w: create_version(w.collection, registry.text_embedder(), status=IndexVersion.Status.BUILDING),
            lambda w, v: ingest.do_activate_version(v),
            None,
        ),
    ),
    Action.GOLDEN_CREATE: (
        lambda w: None,
        lambda w, _: quality.do_add_golden(w.collection, w.alice, question="Hello?", gold=[{"file": "guide.md"}]),
        (
            lambda w: None,
            lambda w, _: quality.do_add_golden(w.collection, w.alice, question="Hello?", gold=[{"file": "gone.md"}]),
            None,
        ),
    ),
    Action.GOLDEN_UPDATE: (
        _golden,
        lambda w, g: quality.do_update_golden(g, question="Where is the guide?"),
        (_golden, lambda w, g: quality.do_update_golden(g, question="Where?"), _failing(GoldenQuestion, "save")),
    ),
    Action.GOLDEN_DELETE: (
        _golden,
        lambda w, g: quality.do_delete_golden(g),
        (_golden, lambda w, g: quality.do_delete_golden(g), _failing(GoldenQuestion, "delete")),
    ),
    Action.GOLDEN_IMPORT: (
        lambda w: None,
        lambda w, _: quality.do_import_golden(w.collection, w.alice, GOLDEN_LINE),
        (
            lambda w: None,
            lambda w, _: quality.do_import_golden(w.collection, w.alice, GOLDEN_LINE),
            _failing(GoldenQuestion, "save"),
        ),
    ),
    Action.GOLDEN_FROM_FEEDBACK: (
        lambda w: _feedback(w, correct_document=w.document),
        lambda w, f: quality.do_golden_from_feedback(f, w.collection, w.alice),
        (_feedback, lambda w, f: quality.do_golden_from_feedback(f, w.collection, w.alice), None),  # no page named
    ),
    Action.EVALUATION_START: (
        _golden,
        lambda w, _: quality.do_start_evaluation(w.collection, w.active, user=w.alice),
        (lambda w: None, lambda w, _: quality.do_start_evaluation(w.collection, w.active, user=w.alice), None),
    ),
    Action.TOKEN_CREATE: (
        lambda w: None,
        lambda w, _: actions.do_create_token(w.alice, "ci"),
        (lambda w: None, lambda w, _: actions.do_create_token(w.alice, "   "), None),
    ),
    Action.TOKEN_REVOKE: (
        lambda w: actions.do_create_token(w.alice, "ci")[0],
        lambda w, t: actions.do_revoke_token(t),
        (
            lambda w: actions.do_create_token(w.alice, "ci")[0],
            lambda w, t: actions.do_revoke_token(t),
            _failing(ApiToken, "save"),
        ),
    ),
}


def _entries_after(mark: int) -> list[Entry]:
    return list(Entry.objects.filter(pk__gt=mark).order_by("pk"))


def _mark() -> int:
    return Entry.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


@pytest.mark.parametrize("action", list(CASES), ids=str)
def test_an_action_leaves_one_entry(world, action):
    setup, act, _failure = CASES[action]
    target = setup(world)
    mark = _mark()
    with acting_as(world.alice, "203.0.113.7"):
        act(world, target)
    entries = _entries_after(mark)
    assert [entry.action for entry in entries] == [action]
    entry = entries[0]
    assert entry.actor_id in (world.alice.pk, world.charlie.pk)  # the invitee answers their own
    assert entry.ip == "203.0.113.7" or entry.actor_id == world.charlie.pk
    assert entry.object_id
    assert entry.object_label
    assert entry.team_id is not None or entry.owner_id == world.alice.pk


@pytest.mark.parametrize("action", list(CASES), ids=str)
def test_a_failed_action_leaves_none(world, action, monkeypatch):
    _setup, _act, (setup, act, patch) = CASES[action]
    target = setup(world)
    if patch is not None:
        patch(monkeypatch)
    mark = _mark()
    with acting_as(world.alice, "203.0.113.7"), pytest.raises((ValidationError, DatabaseError)):
        act(world, target)
    assert _entries_after(mark) == []


def test_an_entry_keeps_before_and_after(world):
    membership = _membership(world, world.bob)
    actions.do_change_role(membership, Role.ADMIN)
    entry = Entry.objects.get(action=Action.MEMBER_ROLE)
    assert entry.changes == {"role": ["viewer", "admin"]}
    assert entry.object_label == str(membership)
    actions.do_rename_collection(world.collection, "Handbook 2", "new words")
    renamed = Entry.objects.get(action=Action.COLLECTION_RENAME)
    assert renamed.changes == {"name": ["Team handbook", "Handbook 2"], "description": ["", "new words"]}
    assert renamed.collection_id == world.collection.pk
    assert renamed.team_id == world.team.pk


def test_entries_outlive_what_they_are_about(world):
    """No foreign keys to the objects: deleting the team keeps its history readable."""
    actions.do_delete_collection(world.collection)
    world.team.delete()
    entry = Entry.objects.get(action=Action.COLLECTION_DELETE)
    assert entry.object_label == "Team handbook"
    assert entry.team_id is not None


def test_a_memory_purge_leaves_one_entry_and_a_refused_one_none(alice):
    store = memories()
    store._mem0.add("alice likes tables", user_id=str(alice.uid), infer=False)
    mark = _mark()
    with pytest.raises(MemoryAccessError):
        store.purge("")
    assert _entries_after(mark) == []
    assert store.delete_all(alice) == 1
    entries = _entries_after(mark)
    assert [(e.action, e.owner_id, e.changes) for e in entries] == [
        (Action.MEMORY_PURGE, alice.pk, {"memories": [1, 0]})
    ]
    assert "tables" not in entries[0].object_label  # what was remembered is never in the log

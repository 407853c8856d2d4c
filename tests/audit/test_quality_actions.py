"""The quality loop's writes in the audit log (quality/actions.py): each leaves exactly one
entry, by the person who made it (page or API), in the collection's log, written in the
change's own transaction, so that a refused or failed write leaves neither the change nor an
entry. The gate's allowance is recorded as a collection setting; feedback is not recorded.

Every action once succeeding and once failing, beside the portal's other actions, is in
tests/audit/test_entries.py; this file follows the entries through the pages and the API."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import DatabaseError
from django.urls import reverse

from assistant.models import Conversation, Message
from audit.models import Action, Entry
from ingestion.actions import do_add_document
from ingestion.index import create_version
from ingestion.versions import flip
from knowledge.models import Collection, Document, IndexVersion
from providers import registry
from quality import actions
from quality.models import EvaluationRun, Feedback, GoldenQuestion
from tests.conftest import token_for

pytestmark = pytest.mark.usefixtures("media")


@pytest.fixture
def guide(team_collection) -> Document:
    document, _run = do_add_document(team_collection, "guide.md", b"# Guide\n\nSome text.", enqueue=False)
    Document.objects.filter(pk=document.pk).update(page_count=3)
    return document


@pytest.fixture
def active(team_collection) -> IndexVersion:
    version = create_version(team_collection, registry.text_embedder(), status=IndexVersion.Status.BUILDING)
    flip(team_collection, version)
    return version


def _mark() -> int:
    return Entry.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def _entries_after(mark: int) -> list[Entry]:
    return list(Entry.objects.filter(pk__gt=mark).order_by("pk"))


def _only_entry(mark: int) -> Entry:
    entries = _entries_after(mark)
    assert len(entries) == 1, [entry.action for entry in entries]
    return entries[0]


def _by(entry: Entry, user: Any, collection: Collection) -> None:
    """The entry is `user`'s, from the test client's address, in the team collection's log."""
    assert (entry.actor, entry.actor_label, entry.ip) == (user, user.email, "127.0.0.1")
    assert (entry.team_id, entry.collection_id, entry.owner_id) == (collection.owner_team_id, collection.pk, None)


def _question(collection: Collection, user: Any, **fields: Any) -> GoldenQuestion:
    values = {"key": "whiskers", "question": "How far?", "lang": "en", "gold": [{"file": "guide.md", "page": 2}]}
    return actions.do_add_golden(collection, user, **{**values, **fields})


def _line(**fields: Any) -> str:
    entry = {"id": "a", "question": "What?", "lang": "en", "type": "fact", "gold": [{"file": "guide.md", "page": 1}]}
    return json.dumps({**entry, **fields}, ensure_ascii=False)


def _feedback(user: Any, collection: Collection, **fields: Any) -> Feedback:
    conversation = Conversation.objects.create(user=user, title="q")
    answer = Message.objects.create(conversation=conversation, role="assistant", content="It is 1.5.")
    feedback = Feedback.objects.create(message=answer, user=user, rating="down", question="How far?", **fields)
    feedback.collections.add(collection)
    return feedback


FORM = {"question": "How far do the whiskers reach?", "lang": "", "kind": "fact", "file": "guide.md", "page": "2"}


# Golden questions


def test_it_records_a_question_added_on_the_page_by_who_added_it(client, alice, team_collection, guide):
    client.force_login(alice)
    mark = _mark()
    assert client.post(reverse("collection-golden", args=[team_collection.pk]), FORM).status_code == 302
    question = GoldenQuestion.objects.get()
    entry = _only_entry(mark)
    assert entry.action == Action.GOLDEN_CREATE
    assert (entry.object_type, entry.object_id, entry.object_label) == (
        "goldenquestion",
        str(question.pk),
        str(question),
    )
    _by(entry, alice, team_collection)


def test_a_refused_question_leaves_no_entry(client, alice, team_collection, guide):
    client.force_login(alice)
    mark = _mark()
    response = client.post(reverse("collection-golden", args=[team_collection.pk]), {**FORM, "page": "9"})
    assert response.status_code == 400
    assert _entries_after(mark) == []
    assert not GoldenQuestion.objects.exists()


def test_an_edit_records_each_changed_field_and_an_edit_that_changes_nothing_none(api, alice, team_collection, guide):
    question = _question(team_collection, alice)
    token_for(api, alice)
    detail = reverse("collection-golden-detail", args=[team_collection.pk, question.pk])
    mark = _mark()
    changed = api.patch(detail, {"question": "How far do they reach?", "keys": ["1.5"]}, format="json")
    assert changed.status_code == 200, changed.content
    entry = _only_entry(mark)
    assert entry.action == Action.GOLDEN_UPDATE
    assert entry.changes == {"question": ["How far?", "How far do they reach?"], "keys": [[], ["1.5"]]}
    assert entry.object_id == str(question.pk)
    _by(entry, alice, team_collection)

    mark = _mark()
    assert api.patch(detail, {"keys": ["1.5"]}, format="json").status_code == 200
    assert _entries_after(mark) == []
    refused = api.patch(detail, {"gold": [{"file": "gone.md"}]}, format="json")
    assert refused.status_code == 400
    assert _entries_after(mark) == []
    question.refresh_from_db()
    assert question.gold == [{"file": "guide.md", "page": 2}]


def test_a_deletion_is_recorded_and_its_entry_outlives_the_question(client, alice, team_collection, guide):
    question = _question(team_collection, alice)
    label = str(question)
    client.force_login(alice)
    mark = _mark()
    response = client.post(reverse("golden-delete", args=[team_collection.pk, question.pk]))
    assert response.status_code == 302
    assert not GoldenQuestion.objects.exists()
    entry = _only_entry(mark)
    assert (entry.action, entry.object_id, entry.object_label) == (Action.GOLDEN_DELETE, str(question.pk), label)
    _by(entry, alice, team_collection)


def test_an_import_is_one_entry_with_its_counts(api, alice, team_collection, guide):
    _question(team_collection, alice, key="known")
    token_for(api, alice)
    body = "\n".join([_line(id="new"), _line(id="known", question="Changed?"), _line(id="bad", lang="fr")])
    mark = _mark()
    url = reverse("collection-golden-import-api", args=[team_collection.pk])
    response = api.post(url, body.encode(), content_type="application/x-ndjson")
    assert response.status_code == 200, response.content
    entry = _only_entry(mark)  # one for the file, none for each question
    assert entry.action == Action.GOLDEN_IMPORT
    assert (entry.object_type, entry.object_id, entry.object_label) == (
        "collection",
        str(team_collection.pk),
        team_collection.name,
    )
    assert entry.changes == {"imported": [None, 1], "updated": [None, 1], "failed": [None, 1]}
    _by(entry, alice, team_collection)


def test_an_import_that_stores_nothing_leaves_no_entry(client, api, alice, team_collection, guide):
    bad = (_line(id="x", lang="fr") + "\n" + _line(id="y", gold=[{"file": "gone.md"}])).encode()
    token_for(api, alice)
    client.force_login(alice)
    mark = _mark()
    url = reverse("collection-golden-import-api", args=[team_collection.pk])
    assert api.post(url, bad, content_type="application/x-ndjson").status_code == 400
    page = reverse("collection-golden-import", args=[team_collection.pk])
    assert client.post(page, {"file": SimpleUploadedFile("golden.jsonl", bad)}).status_code == 400
    assert _entries_after(mark) == []
    assert not GoldenQuestion.objects.exists()


def test_turning_feedback_into_a_test_is_one_entry(client, alice, team_collection, guide):
    feedback = _feedback(alice, team_collection, correct_document=guide, correct_page=2)
    client.force_login(alice)
    url = reverse("feedback-to-golden", args=[feedback.pk])
    mark = _mark()
    assert client.post(url, {"collection": team_collection.pk}).status_code == 302
    made = GoldenQuestion.objects.get()
    entry = _only_entry(mark)  # not also golden.create
    assert entry.action == Action.GOLDEN_FROM_FEEDBACK
    assert (entry.object_id, entry.object_label, entry.changes) == (
        str(made.pk),
        str(made),
        {"feedback": [None, feedback.pk]},
    )
    _by(entry, alice, team_collection)
    mark = _mark()
    assert client.post(url, {"collection": team_collection.pk}).status_code == 302  # already one: refused
    assert _entries_after(mark) == []


# Evaluations and the gate


def test_an_evaluation_a_person_starts_is_recorded_and_a_gate_run_is_not(api, alice, team_collection, guide, active):
    token_for(api, alice)
    url = reverse("collection-evaluation-list", args=[team_collection.pk])
    mark = _mark()
    assert api.post(url, {}, format="json").status_code == 400  # no golden question yet
    assert _entries_after(mark) == []
    assert not EvaluationRun.objects.exists()

    _question(team_collection, alice)
    mark = _mark()
    response = api.post(url, {"answers": True}, format="json")
    assert response.status_code == 201, response.content
    entry = _only_entry(mark)
    assert entry.action == Action.EVALUATION_START
    assert (entry.object_type, entry.object_id, entry.object_label) == (
        "evaluationrun",
        str(response.json()["id"]),
        f"{team_collection.name} v{active.number}",
    )
    assert entry.changes == {"answers": [None, True]}
    _by(entry, alice, team_collection)

    # The gate's run is the portal's own: its outcome is recorded (index.flip or index.held).
    built = create_version(team_collection, registry.text_embedder(), status=IndexVersion.Status.BUILDING)
    mark = _mark()
    actions.do_start_evaluation(team_collection, built, baseline=active)
    assert EvaluationRun.objects.filter(purpose=EvaluationRun.Purpose.GATE).count() == 1
    assert _entries_after(mark) == []


def test_the_gates_allowance_is_recorded_as_a_collection_setting(client, alice, team_collection):
    client.force_login(alice)
    url = reverse("collection-settings", args=[team_collection.pk])
    data = {"chunk_size": "400", "chunk_overlap": "50", "weights": "", "gate_points": "5"}
    mark = _mark()
    assert client.post(url, data).status_code == 302
    entry = _only_entry(mark)
    assert entry.action == Action.COLLECTION_SETTINGS
    assert entry.changes["gate_points"] == [None, 5.0]
    _by(entry, alice, team_collection)


def test_feedback_is_not_recorded(api, alice, team_collection, guide):
    """A thumbs up is a person's own note on their own answer, not a change to the team's
    collection: the collection's managers read it on its Feedback page, not in the log."""
    conversation = Conversation.objects.create(user=alice, title="q")
    answer = Message.objects.create(
        conversation=conversation, role="assistant", content="1.5", searched=[{"id": team_collection.pk}]
    )
    token_for(api, alice)
    url = reverse("message-feedback", kwargs={"message_id": answer.pk})
    mark = _mark()
    assert api.put(url, {"rating": "up"}, format="json").status_code == 201
    assert api.delete(url).status_code == 204
    assert _entries_after(mark) == []


# The entry and the change in one transaction


def _recorded_then_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    """The entry is written, then the connection is lost before the transaction commits."""
    from audit.log import record

    def record_then_fail(*args: Any, **kwargs: Any) -> Entry:
        record(*args, **kwargs)
        raise DatabaseError("connection lost")

    monkeypatch.setattr(actions, "record", record_then_fail)


def _state(collection: Collection) -> list[Any]:
    questions = GoldenQuestion.objects.filter(collection=collection).order_by("key")
    return [list(questions.values_list("key", "question", "keys")), EvaluationRun.objects.count()]


WRITES: dict[str, Callable[[Any, Collection, Any, IndexVersion], object]] = {
    "add": lambda user, c, q, v: _question(c, user, key="other"),
    "update": lambda user, c, q, v: actions.do_update_golden(q, question="Changed?", keys=["1.5"]),
    "delete": lambda user, c, q, v: actions.do_delete_golden(q),
    "import": lambda user, c, q, v: actions.do_import_golden(c, user, _line(id="new") + "\n" + _line(id="whiskers")),
    "from feedback": lambda user, c, q, v: actions.do_golden_from_feedback(
        _feedback(user, c, correct_document=Document.objects.get(collection=c)), c, user
    ),
    "evaluation": lambda user, c, q, v: actions.do_start_evaluation(c, v, user=user),
}


@pytest.mark.parametrize("write", list(WRITES))
def test_a_write_whose_transaction_fails_leaves_neither_change_nor_entry(
    monkeypatch, alice, team_collection, guide, active, write
):
    question = _question(team_collection, alice)
    before = _state(team_collection)
    _recorded_then_lost(monkeypatch)
    mark = _mark()
    with pytest.raises(DatabaseError):
        WRITES[write](alice, team_collection, question, active)
    assert _entries_after(mark) == []
    assert _state(team_collection) == before


# The log shows them


def test_the_audit_log_lists_and_filters_the_quality_loops_entries(client, api, alice, team_collection, guide):
    question = _question(team_collection, alice)
    actions.do_delete_golden(question)
    client.force_login(alice)
    page = client.get(reverse("audit"), {"action": Action.GOLDEN_DELETE.value})
    assert page.status_code == 200
    html = page.content.decode()
    rows = html.split("<table", 1)[1]
    assert "Golden question deleted" in rows
    assert "Golden question added" not in rows  # filtered out
    for action in (Action.GOLDEN_IMPORT, Action.GOLDEN_FROM_FEEDBACK, Action.EVALUATION_START):
        assert f'value="{action.value}"' in html  # offered by the action filter
    token_for(api, alice)
    listed = api.get(reverse("audit-list"), {"action": Action.GOLDEN_CREATE.value})
    assert listed.status_code == 200
    assert [row["action_label"] for row in listed.json()["results"]] == ["Golden question added"]

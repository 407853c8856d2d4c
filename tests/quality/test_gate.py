"""The gate between a built index version and its flip (quality/gate.py, quality/runs.py),
with the real local embedder and search, runs done here: the evaluation's queue is the only
thing replaced (its task is applied at once instead of sent to a worker; the real worker is
test_quality_loop.py's)."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.urls import reverse

from audit.models import Action, Entry
from common.runs import claim
from ingestion import actions, versions
from knowledge.models import Collection, IndexedDocument, IndexVersion
from portal.tasks import requeue_stale_runs
from providers import registry
from providers.base import ProviderError
from quality import evaluation, runs
from quality.actions import do_start_evaluation
from quality.models import EvaluationRun, GoldenQuestion
from quality.tasks import evaluate_version
from tests.ingestion.runs import drain

pytestmark = pytest.mark.usefixtures("media")

TEXT = {
    "travel.md": "# Travel\n\nHotel nights are refunded up to 400 euros in Paris and 250 elsewhere.",
    "laptops.md": "# Laptops\n\nEvery engineer gets a new laptop every three years; batteries sooner.",
}


@pytest.fixture(autouse=True)
def evaluations_run_here(monkeypatch):
    def run_here(run):
        transaction.on_commit(lambda: evaluate_version.apply(args=(run.pk,)))

    monkeypatch.setattr(runs, "enqueue", run_here)


@pytest.fixture
def indexed(db, private_collection) -> Collection:
    for name, text in TEXT.items():
        actions.do_add_document(private_collection, name, text.encode(), enqueue=False)
    drain(private_collection)
    private_collection.refresh_from_db()
    return private_collection


def with_golden(collection: Collection) -> Collection:
    add = GoldenQuestion.objects.create
    add(collection=collection, key="hotel", question="How much is a hotel night in Paris?", lang="en",
        gold=[{"file": "travel.md", "page": 1}])  # fmt: skip
    add(collection=collection, key="laptop", question="How often do engineers get a laptop?", lang="en",
        gold=[{"file": "laptops.md"}])  # fmt: skip
    return collection


def rebuild(collection: Collection, django_capture_on_commit_callbacks) -> IndexVersion:
    with django_capture_on_commit_callbacks(execute=True):
        version = versions.start_reindex(collection, registry.text_embedder(), enqueue=False)
        drain(collection)
    version.refresh_from_db()
    collection.refresh_from_db()
    return version


def test_without_golden_questions_a_built_version_flips_at_once(indexed, django_capture_on_commit_callbacks):
    version = rebuild(indexed, django_capture_on_commit_callbacks)
    assert version.status == "active"
    assert not EvaluationRun.objects.exists()


def test_a_version_no_worse_than_the_active_one_flips_after_its_evaluation(indexed, django_capture_on_commit_callbacks):
    first = indexed.active_version_id
    version = rebuild(with_golden(indexed), django_capture_on_commit_callbacks)
    run = EvaluationRun.objects.get(version=version)
    assert run.purpose == "gate"
    assert run.status == "succeeded"
    assert run.baseline_id == first
    assert run.decision == "flipped"
    assert run.drops == {"hit@1": 0.0, "hit@5": 0.0, "mrr": 0.0}
    assert run.summary["version"]["overall"]["hit@1"] == 1.0  # both questions find their page first
    assert run.progress == run.total == 4  # two questions, in two versions
    assert version.status == "active"
    assert indexed.active_version_id == version.pk
    assert Entry.objects.filter(action=Action.INDEX_FLIP, object_id=str(version.pk)).exists()


def test_a_version_that_drops_more_than_allowed_is_held_then_flipped_anyway(
    client, alice, indexed, django_capture_on_commit_callbacks
):
    indexed.settings = {**indexed.settings, "gate_points": -1}  # no drop at all is allowed: 0 > -1
    indexed.save(update_fields=["settings"])
    first = indexed.active_version_id
    held = rebuild(with_golden(indexed), django_capture_on_commit_callbacks)
    run = EvaluationRun.objects.get(version=held)
    assert run.decision == "held"
    assert held.status == "held"
    assert indexed.active_version_id == first
    entry = Entry.objects.get(action=Action.INDEX_HELD, object_id=str(held.pk))
    assert entry.changes == {"hit@1": [None, 0.0], "hit@5": [None, 0.0], "mrr": [None, 0.0]}
    client.force_login(alice)
    page = client.get(reverse("collection-quality", args=[indexed.pk])).content.decode()
    assert f"Version {held.number} is held back" in page
    assert "Flip to version" in page

    # New documents still reach it, so that it covers everything when flipped anyway.
    actions.do_add_document(indexed, "late.md", b"# Late\n\nAdded while a version is held.", enqueue=False)
    drain(indexed)
    assert IndexedDocument.objects.filter(index_version=held, document__rel_path="late.md").exists()

    response = client.post(reverse("collection-flip-anyway", args=[indexed.pk, held.number]))
    assert response.status_code == 302
    indexed.refresh_from_db()
    assert indexed.active_version_id == held.pk
    assert Entry.objects.get(action=Action.INDEX_FLIP_ANYWAY, object_id=str(held.pk)).actor == alice
    assert client.post(reverse("collection-flip-anyway", args=[indexed.pk, held.number])).status_code == 404


def test_a_failed_evaluation_holds_the_version_with_its_error(indexed, monkeypatch, django_capture_on_commit_callbacks):
    def broken(*args, **kwargs):
        raise ProviderError("embedding", "local", "the embedding model is gone")

    monkeypatch.setattr(evaluation, "retrieval", broken)
    version = rebuild(with_golden(indexed), django_capture_on_commit_callbacks)
    run = EvaluationRun.objects.get(version=version)
    assert run.status == "failed"
    assert "the embedding model is gone" in run.error
    assert version.status == "held"


def test_a_new_reindex_replaces_a_held_version_and_beat_leaves_it(indexed, django_capture_on_commit_callbacks):
    indexed.settings = {"chunk_size": 120, "chunk_overlap": 10, "gate_points": -1}
    indexed.save(update_fields=["settings"])
    held = rebuild(with_golden(indexed), django_capture_on_commit_callbacks)
    assert held.status == "held"
    # Built as it would be now: beat's outdated check does not build it again every 5 minutes.
    assert versions.reindex_outdated(registry.text_embedder()) == []
    replacement = versions.start_reindex(indexed, registry.text_embedder(), enqueue=False)
    assert not IndexVersion.objects.filter(pk=held.pk).exists()
    assert replacement.status == "building"


def test_a_stale_question_is_left_out_and_counted(indexed, django_capture_on_commit_callbacks):
    with_golden(indexed)
    GoldenQuestion.objects.create(
        collection=indexed, key="gone", question="What did the old file say?", lang="en", gold=[{"file": "old.md"}]
    )
    with django_capture_on_commit_callbacks(execute=True):
        run = do_start_evaluation(indexed, IndexVersion.objects.get(pk=indexed.active_version_id))
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert run.stale == 1
    assert run.summary["stale"] == ["gone"]
    assert run.summary["version"]["overall"]["n"] == 2


def test_answers_are_scored_on_demand_and_leave_no_conversation(alice, indexed):
    from assistant.models import Conversation
    from tests.assistant.test_answering import ScriptedChat

    with_golden(indexed)
    GoldenQuestion.objects.create(
        collection=indexed, key="none", question="What is the canteen's menu?", lang="en", kind="unanswerable"
    )
    found = evaluation.questions_of(indexed)
    version = IndexVersion.objects.get(pk=indexed.active_version_id)
    chat = ScriptedChat(answer=lambda prompt: "Up to 400 euros a night in Paris [1].")
    scored = evaluation.answers(alice, version, found.usable, model=chat)
    overall = scored["summary"]["overall"]
    assert overall["n"] == 3
    assert overall["cite@5"] == 1.0  # the answerable two cite their gold page (any page of laptops.md)
    assert overall["abstain_false"] == 0.0
    assert overall["abstain_correct"] == 0.0  # the scripted model answered the unanswerable one too
    assert [row["id"] for row in scored["per_question"]] == ["hotel", "laptop", "none"]
    assert not Conversation.objects.filter(user=alice).exists()


def test_a_run_whose_worker_died_is_queued_again_and_starts_over(indexed, settings, django_capture_on_commit_callbacks):
    from datetime import timedelta

    from django.utils import timezone

    settings.RUN_STALE_MINUTES = 10
    version = IndexVersion.objects.get(pk=indexed.active_version_id)
    run = EvaluationRun.objects.create(collection=indexed, version=version, version_number=version.number)
    assert claim(run, progress=0)
    assert not claim(run, progress=0)  # running, alive: another worker's
    assert requeue_stale_runs() == 0
    EvaluationRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=11), progress=7)
    assert not claim(run, progress=0)  # a second message for it does nothing: only beat requeues
    with django_capture_on_commit_callbacks() as sent:
        assert requeue_stale_runs() == 1  # no sign of life for longer than allowed
    assert len(sent) == 1  # its task, sent again
    run.refresh_from_db()
    assert run.status == "queued"
    assert "stopped giving signs of life" in run.error
    assert claim(run, progress=0)
    run.refresh_from_db()
    assert (run.status, run.progress, run.error) == ("running", 0, "")

"""The quality loop end to end, with a real Celery worker (ingestion and the `evaluation`
queue), the local models, PostgreSQL and Redis: an answer's feedback becomes a golden
question, the public evaluation's questions on the same real files are imported beside it,
the active version is evaluated, and reindexes are gated: a version with tiny chunks is
built and held back; the usual chunks, built again, are no worse and flip by themselves;
rollback works as before. A deleted file makes its questions stale. Flipping a held version
anyway: test_gate.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings
from django.urls import reverse

from assistant.models import Conversation, Message
from assistant.retrieval.search import search
from audit.models import Action, Entry
from knowledge.models import Collection, Document, IndexVersion
from quality.models import EvaluationRun, GoldenQuestion
from sources.actions import do_folder_source, do_sync_here
from tests.conftest import make_collection, token_for, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("media"), pytest.mark.stack]

EVAL = Path(settings.BASE_DIR) / "eval"
# Real files of the public evaluation (eval/manifest-*.jsonl: package, version, licence).
# On these (10 public questions and alice's), measured on 2026-12-07: tiny chunks leave hit@1
# at 0.545 but move hit@5 from 1.000 to 0.727 and MRR from 0.712 to 0.633: held back by two
# metrics. (Four files until then, zhlineskip.pdf too: each of the three builds parsed its
# eight pages again, a quarter of the test's time.)
FILES = ("zoo-quickref.pdf", "news.md", "snownlp-readme.md")
TINY = {"chunk_size": 50, "chunk_overlap": 0}
USUAL = {"chunk_size": 400, "chunk_overlap": 50}


def public_lines() -> list[str]:
    """The public evaluation's answerable questions on FILES, as JSON Lines."""
    lines = []
    for raw in (EVAL / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        entry = json.loads(raw)
        if entry["type"] not in ("unanswerable", "picture") and all(g["file"] in FILES for g in entry["gold"]):
            lines.append(raw)
    return lines


def gate_run(version: IndexVersion) -> EvaluationRun:
    """The gate's run of `version`, once it decided."""
    return wait_for(
        lambda: EvaluationRun.objects.filter(version=version, purpose="gate").exclude(decision="").first(),
        600,
        f"the gate's decision on v{version.number}",
    )


def settle_build(collection: Collection) -> IndexVersion:
    """The version being built, once the worker has built it (and the gate decided)."""
    building = IndexVersion.objects.filter(collection=collection, status="building").order_by("-number").first()
    assert building is not None
    run = gate_run(building)
    assert run.status == "succeeded", run.error
    building.refresh_from_db()
    return building


def test_feedback_becomes_a_test_and_reindexes_are_gated(client, api, alice, live_worker, tmp_path):
    collection = make_collection(alice, "Manuals")
    folder = tmp_path / "files"
    folder.mkdir()
    for name in FILES:
        shutil.copy2(next(EVAL.glob(f"files/*/{name}")), folder / name)
    with override_settings(SOURCE_ROOTS=[str(folder)]):
        do_sync_here(do_folder_source(collection, str(folder)))  # the first version, indexed here
    collection.refresh_from_db()
    first = IndexVersion.objects.get(pk=collection.active_version_id or 0)
    token_for(api, alice)
    client.force_login(alice)

    # An answer to a question, with a citation where search puts it; alice corrects it.
    asked = "Which zoo function applies a function over rolling windows?"
    hit = search(alice, asked, collection_ids=[collection.pk], k=1).hits[0]
    conversation = Conversation.objects.create(user=alice, title=asked)
    conversation.collections.add(collection)
    Message.objects.create(conversation=conversation, role="user", content=asked)
    answer = Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="It applies a function to rolling windows [1].",
        citations=[
            {
                "n": 1,
                "file": hit.document_name,
                "page": hit.page_number,
                "document_id": hit.document_id,
                "collection_id": collection.pk,
                "chunk_id": hit.chunk_id,
                "score": hit.score,
            }
        ],
        searched=[{"id": collection.pk, "name": collection.name, "version": first.number}],
    )
    zoo = Document.objects.get(collection=collection, name="zoo-quickref.pdf")
    response = api.put(
        f"/api/messages/{answer.pk}/feedback/",
        {"rating": "down", "comment": "wrong page", "correct_document": zoo.pk, "correct_page": 6},
        format="json",
    )
    assert response.status_code in (200, 201), response.content
    feedback_id = response.json()["id"]
    response = api.post(f"/api/feedback/{feedback_id}/golden/", {"collection": collection.pk}, format="json")
    assert response.status_code == 201, response.content
    from_feedback = GoldenQuestion.objects.get(collection=collection, feedback_id=feedback_id)
    assert from_feedback.gold == [{"file": "zoo-quickref.pdf", "page": 6}]

    # The public questions on the same files, imported as JSON Lines.
    lines = public_lines()
    response = api.post(
        f"/api/collections/{collection.pk}/golden-questions/import/",
        data="\n".join(lines).encode(),
        content_type="application/x-ndjson",
    )
    assert response.status_code == 200, response.content
    assert response.json()["imported"] == len(lines)
    assert response.json()["errors"] == []

    # The active version, evaluated by the worker.
    response = api.post(f"/api/collections/{collection.pk}/evaluations/", {}, format="json")
    assert response.status_code == 201, response.content
    run_id = response.json()["id"]
    run = wait_for(
        lambda: EvaluationRun.objects.filter(pk=run_id, status__in=["succeeded", "failed"]).first(), 300, "evaluation"
    )
    assert run.status == "succeeded", run.error
    assert run.total == len(lines) + 1
    assert run.progress == run.total
    measured = run.summary["version"]
    assert measured["overall"]["n"] == len(lines) + 1
    assert set(measured["by_lang"]) == {"en", "zh"}
    assert measured["overall"]["hit@5"] > 0.5  # the usual chunks find most gold pages on these files

    # Tiny chunks: built by the worker, evaluated against v1, held back.
    response = client.post(reverse("collection-settings", args=[collection.pk]), {**TINY, "weights": ""})
    assert response.status_code == 302
    assert api.post(f"/api/collections/{collection.pk}/reindex/").status_code in (200, 201, 202)
    tiny = settle_build(collection)
    run = gate_run(tiny)
    collection.refresh_from_db()
    assert run.decision == "held", run.drops
    assert tiny.status == "held"
    assert collection.active_version_id == first.pk
    assert run.drops["hit@5"] > 2.0
    assert Entry.objects.filter(action=Action.INDEX_HELD, object_id=str(tiny.pk)).count() == 1
    page = client.get(reverse("collection-quality", args=[collection.pk])).content.decode()
    assert f"Version {tiny.number} is held back" in page

    # The usual chunks again: a new build replaces the held one, is no worse, and flips.
    response = client.post(reverse("collection-settings", args=[collection.pk]), {**USUAL, "weights": ""})
    assert response.status_code == 302
    assert api.post(f"/api/collections/{collection.pk}/reindex/").status_code in (200, 201, 202)
    assert not IndexVersion.objects.filter(pk=tiny.pk).exists()
    usual = settle_build(collection)
    run = gate_run(usual)
    collection.refresh_from_db()
    assert run.decision == "flipped", run.drops
    assert max(run.drops.values()) <= 2.0
    assert collection.active_version_id == usual.pk
    assert usual.status == "active"
    assert api.post(f"/api/collections/{collection.pk}/rollback/").status_code in (200, 201)
    collection.refresh_from_db()
    assert collection.active_version_id == first.pk

    # A deleted file: its questions are stale, left out and counted, not failed.
    api.delete(f"/api/documents/{Document.objects.get(collection=collection, name='news.md').pk}/")
    response = api.post(f"/api/collections/{collection.pk}/evaluations/", {}, format="json")
    run = wait_for(
        lambda: EvaluationRun.objects.filter(pk=response.json()["id"], status="succeeded").first(), 300, "evaluation"
    )
    on_news = sum("news.md" in line for line in lines)
    assert run.stale == on_news
    assert len(run.summary["stale"]) == on_news
    assert run.total == len(lines) + 1 - on_news

"""POST /api/documents/<id>/rerun/: editors index a document again through the audited action
the page's Re-run button uses; a document already queued or being indexed answers 409 with
that run. The document's API shows its last run."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from audit.models import Action, Entry
from ingestion.actions import do_add_document
from ingestion.models import IngestionRun
from knowledge import actions
from knowledge.models import Collection, Document, Role
from tests.conftest import set_role, token_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]


def add(collection: Collection, name: str = "guide.md") -> tuple[Document, IngestionRun]:
    document, run = do_add_document(collection, name, f"# {name}\n\ntext".encode(), enqueue=False)
    assert run is not None
    return document, run


def end(run: IngestionRun, status: str, error: str = "", progress: int = 0, total: int | None = None) -> None:
    now = timezone.now()
    IngestionRun.objects.filter(pk=run.pk).update(
        status=status, error=error, progress=progress, total=total, started_at=now, finished_at=now
    )
    document_status = "failed" if status == "failed" else "ready"
    Document.objects.filter(runs=run).update(status=document_status, error=error)


def failed_document(collection: Collection) -> tuple[Document, IngestionRun]:
    document, run = add(collection)
    end(run, "failed", "guide.md: the parser crashed", progress=1, total=3)
    return document, run


def rerun(api, document: Document):
    return api.post(f"/api/documents/{document.pk}/rerun/")


def test_it_lets_an_editor_run_a_document_again(api, alice, bob, team, team_collection):
    document, first = failed_document(team_collection)
    set_role(team, bob, Role.EDITOR)
    token_for(api, bob)
    response = rerun(api, document)
    assert response.status_code == 202, response.content
    body = response.json()
    run = IngestionRun.objects.get(document=document, status="queued")
    assert run.pk != first.pk
    assert body == {
        "id": run.pk,
        "status": "queued",
        "pages_done": 0,
        "pages_total": None,
        "error": "",
        "created_at": body["created_at"],
        "started_at": None,
        "finished_at": None,
    }
    assert response["Location"] == reverse("document-detail", args=[document.pk])
    entry = Entry.objects.get(action=Action.DOCUMENT_RERUN)
    assert (entry.object_id, entry.object_label, entry.actor_id) == (str(document.pk), "guide.md", bob.pk)
    assert (entry.team_id, entry.collection_id) == (team.pk, team_collection.pk)
    assert api.get(f"/api/documents/{document.pk}/").json()["last_run"]["id"] == run.pk


def test_it_refuses_a_viewer_and_hides_the_document_from_a_stranger(api, bob, charlie, team_collection):
    document, _run = failed_document(team_collection)
    token_for(api, bob)  # a viewer of the team
    assert rerun(api, document).status_code == 403
    token_for(api, charlie)
    response = rerun(api, document)
    assert response.status_code == 404
    assert "guide.md" not in response.content.decode()
    assert IngestionRun.objects.filter(document=document).count() == 1
    assert not Entry.objects.filter(action=Action.DOCUMENT_RERUN).exists()


def test_it_refuses_a_read_only_token(api, alice, private_collection):
    document, _run = failed_document(private_collection)
    _token, key = actions.do_create_token(alice, "reader", read_only=True)
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert rerun(api, document).status_code == 403
    assert IngestionRun.objects.filter(document=document).count() == 1


def test_a_token_limited_to_another_collection_does_not_find_it(api, alice, private_collection, team_collection):
    document, _run = failed_document(private_collection)
    _token, key = actions.do_create_token(alice, "limited", collections=[team_collection])
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert rerun(api, document).status_code == 404
    _token, key = actions.do_create_token(alice, "limited", collections=[private_collection])
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert rerun(api, document).status_code == 202


@pytest.mark.parametrize("status", ["queued", "running"])
def test_a_document_already_being_indexed_answers_409_with_its_run(api, alice, private_collection, status):
    document, run = add(private_collection)
    IngestionRun.objects.filter(pk=run.pk).update(status=status, progress=2, total=5)
    token_for(api, alice)
    response = rerun(api, document)
    assert response.status_code == 409
    body = response.json()
    assert body["detail"] == "“guide.md” is already being indexed."
    assert (body["run"]["id"], body["run"]["status"], body["run"]["pages_done"]) == (run.pk, status, 2)
    assert IngestionRun.objects.filter(document=document).count() == 1
    assert not Entry.objects.filter(action=Action.DOCUMENT_RERUN).exists()


def test_a_run_asked_to_stop_does_not_hold_a_new_one_back(api, alice, private_collection):
    document, run = add(private_collection)
    IngestionRun.objects.filter(pk=run.pk).update(status="running", cancel_requested=True)
    token_for(api, alice)
    assert rerun(api, document).status_code == 202
    assert IngestionRun.objects.filter(document=document, status="queued").count() == 1


def test_a_split_document_counts_its_parts_and_is_busy_while_one_works(api, alice, private_collection):
    document, root = add(private_collection, "long.md")
    IngestionRun.objects.filter(pk=root.pk).update(
        status="succeeded", progress=10, total=30, first_page=1, last_page=10
    )
    for first, status, done in ((11, "succeeded", 10), (21, "running", 4)):
        IngestionRun.objects.create(
            collection=private_collection,
            document=document,
            part_of=root,
            first_page=first,
            last_page=first + 9,
            total=10,
            status=status,
            progress=done,
        )
    token_for(api, alice)
    response = rerun(api, document)
    assert response.status_code == 409
    assert response.json()["run"]["id"] == root.pk  # the document's run, not the part's
    last_run = api.get(f"/api/documents/{document.pk}/").json()["last_run"]
    assert (last_run["id"], last_run["pages_done"], last_run["pages_total"]) == (root.pk, 24, 30)


def test_the_page_and_the_api_behave_alike(client, alice, private_collection):
    document, run = add(private_collection)
    url = reverse("document-rerun", args=[document.pk])
    client.force_login(alice)
    response = client.post(url, follow=True)
    assert "is already being indexed" in response.content.decode()
    assert IngestionRun.objects.filter(document=document).count() == 1
    end(run, "failed", "broken")
    response = client.post(url, follow=True)
    assert "is being indexed again" in response.content.decode()
    assert IngestionRun.objects.filter(document=document, status="queued").count() == 1
    assert Entry.objects.filter(action=Action.DOCUMENT_RERUN, object_id=str(document.pk)).count() == 1


def test_the_detail_and_the_list_show_the_last_run(api, alice, private_collection):
    failed, old = failed_document(private_collection)
    ready, _run = add(private_collection, "notes.md")
    IngestionRun.objects.filter(document=ready).delete()
    again, older = add(private_collection, "again.md")
    end(older, "failed", "first try failed")
    newer = IngestionRun.objects.create(collection=private_collection, document=again)
    end(newer, "succeeded", progress=3, total=3)
    token_for(api, alice)
    detail = api.get(f"/api/documents/{failed.pk}/").json()["last_run"]
    assert (detail["id"], detail["status"], detail["error"]) == (old.pk, "failed", "guide.md: the parser crashed")
    assert (detail["pages_done"], detail["pages_total"]) == (1, 3)
    assert detail["finished_at"] is not None
    listed = api.get(f"/api/collections/{private_collection.pk}/documents/").json()["results"]
    runs = {row["name"]: row["last_run"] for row in listed}
    assert runs["guide.md"] == detail
    assert runs["notes.md"] is None  # no run left (a document from before runs were kept)
    assert (runs["again.md"]["id"], runs["again.md"]["status"], runs["again.md"]["error"]) == (
        newer.pk,
        "succeeded",
        "",
    )
    assert runs["again.md"]["pages_done"] == 3


def test_the_list_costs_the_same_queries_for_many_documents(
    api, alice, private_collection, django_assert_max_num_queries
):
    failed_document(private_collection)
    add(private_collection, "1.md")
    token_for(api, alice)
    url = f"/api/collections/{private_collection.pk}/documents/"
    with django_assert_max_num_queries(QUERIES):
        assert len(api.get(url).json()["results"]) == 2
    for number in range(2, 12):
        _document, run = add(private_collection, f"{number}.md")
        end(run, "succeeded", progress=1, total=1)
    with django_assert_max_num_queries(QUERIES):
        rows = api.get(url).json()["results"]
    assert len(rows) == 12
    assert all(row["last_run"] is not None for row in rows)


QUERIES = 6  # the token, its collections' check, the collection, the count, the page, the runs

"""The sources pages: the list with its form, a source's settings, Sync now, runs and the
removal with its documents; errors beside their fields; credentials never rendered back
(only "stored" or "none"); the collection's "Sources" link for those who manage it. Members
who do not manage the collection get 403, everyone else 404."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from audit.models import Action, Entry
from ingestion.actions import do_add_document
from knowledge.models import Document, Role
from sources.actions import do_save_source
from sources.models import Source, SourceFile, SyncRun
from sources.remotes import Credentials
from tests.conftest import set_role

pytestmark = pytest.mark.usefixtures("media")

SECRET = "hunter2-Zq9!secret"
USERNAME = "reader-7f3a"


def _folder(collection, roots: Path, name: str = "Handbook share") -> Source:
    source = Source(collection=collection, name=name, kind="folder", url=str(roots / "handbook"))
    return do_save_source(source, credentials=Credentials(USERNAME, SECRET))


def _form(roots: Path, **fields: Any) -> dict[str, Any]:
    return {
        "name": "Handbook share",
        "kind": "folder",
        "url": str(roots / "handbook"),
        "enabled": "on",
        "username": USERNAME,
        "password": SECRET,
        **fields,
    }


def _text(response: Any) -> str:
    return response.content.decode()


def _no_credentials(response: Any) -> None:
    assert SECRET not in _text(response)
    assert USERNAME not in _text(response)


def test_an_owner_adds_a_source_on_the_page(client, alice, private_collection, roots):
    client.force_login(alice)
    url = reverse("collection-sources", args=[private_collection.pk])
    empty = client.get(url)
    assert empty.status_code == 200
    assert "Add a source" in _text(empty)
    assert "No sources yet" in _text(empty)
    response = client.post(url, _form(roots, schedule="6h", include="*.md\ndocs/"))
    source = Source.objects.get(collection=private_collection)
    assert response.status_code == 302
    assert response["Location"] == reverse("source", args=[source.pk])
    assert source.credentials() == Credentials(USERNAME, SECRET)
    assert SECRET not in source.credentials_token
    assert source.include == "*.md\ndocs/"
    assert source.next_sync_at is not None
    assert Entry.objects.filter(action=Action.SOURCE_CREATE, object_id=str(source.pk), actor=alice).exists()
    listing = client.get(url)
    assert "Handbook share" in _text(listing)
    assert "6h" in _text(listing)
    page = client.get(response["Location"])
    assert page.status_code == 200
    assert 'data-credentials="stored"' in _text(page)
    _no_credentials(listing)
    _no_credentials(page)
    # The credentials' inputs are empty: nothing to read back, not even masked.
    for name in ("username", "password"):
        tag = re.search(rf'<input[^>]*name="{name}"[^>]*>', _text(page))
        assert tag is not None
        assert "value=" not in tag.group(0)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"url": "/etc"}, "url"),
        ({"kind": "git", "url": f"https://{USERNAME}:{SECRET}@git.example.com/team/handbook.git"}, "url"),
        ({"schedule": "every tuesday"}, "schedule"),
        ({"link_template": "https://git.example.com/{file}"}, "link_template"),
        ({"kind": "s3", "url": ""}, "bucket"),
    ],
)
def test_errors_show_beside_their_field_without_credentials(client, alice, private_collection, roots, fields, field):
    client.force_login(alice)
    response = client.post(reverse("collection-sources", args=[private_collection.pk]), _form(roots, **fields))
    assert response.status_code == 400
    assert field in response.context["form"].errors, response.context["form"].errors
    assert 'class="errorlist' in _text(response)
    assert not Source.objects.exists()
    _no_credentials(response)


def test_an_owner_edits_a_source_and_keeps_or_clears_its_credentials(client, alice, private_collection, roots):
    source = _folder(private_collection, roots)
    client.force_login(alice)
    url = reverse("source", args=[source.pk])
    kept = client.post(url, _form(roots, schedule="0 3 * * 1-5", username="", password=""))
    assert kept.status_code == 302
    source.refresh_from_db()
    assert source.schedule == "0 3 * * 1-5"
    assert source.credentials() == Credentials(USERNAME, SECRET)
    update = Entry.objects.get(action=Action.SOURCE_UPDATE, object_id=str(source.pk))
    assert update.changes == {"schedule": ["", "0 3 * * 1-5"]}
    wrong = client.post(url, _form(roots, name="", schedule="every tuesday"))
    assert wrong.status_code == 400
    assert {"name", "schedule"} <= set(wrong.context["form"].errors)
    assert "<h1>Handbook share</h1>" in _text(wrong)  # the stored name, not the one refused
    _no_credentials(wrong)
    cleared = client.post(url, _form(roots, username="", password="", clear_credentials="on"))
    assert cleared.status_code == 302
    source.refresh_from_db()
    assert source.credentials_token == ""
    assert 'data-credentials="none"' in _text(client.get(url))


def test_sync_now_queues_a_run_and_the_page_shows_the_runs(
    client, alice, private_collection, roots, django_capture_on_commit_callbacks
):
    source = _folder(private_collection, roots)
    client.force_login(alice)
    with django_capture_on_commit_callbacks() as queued:
        response = client.post(reverse("source-sync", args=[source.pk]), follow=True)
    assert len(queued) == 1
    run = SyncRun.objects.get(source=source)
    assert run.status == SyncRun.Status.QUEUED
    assert run.requested_by == alice
    assert "Sync queued" in _text(response)
    assert f'data-run="{run.pk}"' in _text(response)
    assert alice.email in _text(response)
    again = client.post(reverse("source-sync", args=[source.pk]), follow=True)
    assert "already syncing" in _text(again)
    assert SyncRun.objects.filter(source=source).count() == 1
    # As the engine leaves a run that skipped a file (sources/sync.py is tested on its own).
    SyncRun.objects.filter(pk=run.pk).update(
        status=SyncRun.Status.SUCCEEDED,
        counts={"listed": 4, "added": 2, "changed": 0, "unchanged": 1, "renamed": 0, "deleted": 0, "failed": 1},
        failures=[{"path": "scans/huge.pdf", "error": "larger than the upload limit"}],
    )
    page = _text(client.get(reverse("source", args=[source.pk])))
    assert "scans/huge.pdf" in page
    assert "larger than the upload limit" in page
    assert '<td class="count" data-count="added">2</td>' in page
    assert '<td class="count" data-count="failed">1</td>' in page
    assert 'src="/static/portal/sources.js"' in page
    assert "<script>" not in page


def test_removing_a_source_removes_its_documents(client, alice, private_collection, roots):
    source = _folder(private_collection, roots)
    document, _run = do_add_document(private_collection, "handbook/guide.md", b"# Guide\n\nText.", enqueue=False)
    SourceFile.objects.create(source=source, document=document, path="guide.md", signal="1-1")
    kept, _run = do_add_document(private_collection, "notes.md", b"# Notes", enqueue=False)
    client.force_login(alice)
    url = reverse("source-delete", args=[source.pk])
    confirm = client.get(url)
    assert confirm.status_code == 200
    assert "the 1 document it brought" in _text(confirm)
    response = client.post(url)
    assert response.status_code == 302
    assert response["Location"] == reverse("collection-sources", args=[private_collection.pk])
    assert not Source.objects.filter(pk=source.pk).exists()
    assert not Document.objects.filter(pk=document.pk).exists()
    assert Document.objects.filter(pk=kept.pk).exists()
    assert Entry.objects.filter(action=Action.SOURCE_DELETE, object_id=str(source.pk)).exists()


def test_the_collection_links_its_sources_for_those_who_manage_it(client, alice, bob, team, team_collection):
    link = reverse("collection-sources", args=[team_collection.pk])
    client.force_login(alice)
    assert link in _text(client.get(reverse("collection", args=[team_collection.pk])))
    assert link in _text(client.get(reverse("collection-quality", args=[team_collection.pk])))
    set_role(team, bob, Role.EDITOR)
    client.force_login(bob)
    assert link not in _text(client.get(reverse("collection", args=[team_collection.pk])))


def _pages(collection_id: int, source: Source) -> list[str]:
    return [
        reverse("collection-sources", args=[collection_id]),
        reverse("source", args=[source.pk]),
        reverse("source-sync", args=[source.pk]),
        reverse("source-delete", args=[source.pk]),
    ]


@pytest.mark.parametrize("role", [Role.VIEWER, Role.EDITOR])
def test_members_who_do_not_manage_get_403(client, alice, bob, team, team_collection, roots, role):
    set_role(team, bob, role)
    source = _folder(team_collection, roots)
    client.force_login(bob)
    for url in _pages(team_collection.pk, source):
        for response in (client.get(url), client.post(url, _form(roots, name="Mine"))):
            assert response.status_code in (403, 405), (url, response.status_code)
            assert "Handbook share" not in _text(response)
            assert SECRET not in _text(response)
    assert Source.objects.get(pk=source.pk).name == "Handbook share"
    assert not SyncRun.objects.exists()


def test_others_get_404(client, alice, bob, charlie, team, private_collection, roots):
    source = _folder(private_collection, roots)
    for user in (charlie, bob):
        client.force_login(user)
        for url in _pages(private_collection.pk, source):
            for response in (client.get(url), client.post(url, _form(roots, name="Mine"))):
                assert response.status_code in (404, 405), (user, url, response.status_code)
                assert "Handbook share" not in _text(response)
    assert Source.objects.filter(pk=source.pk).exists()

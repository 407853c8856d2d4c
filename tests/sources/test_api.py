"""Sources over the REST API: added, read, changed and removed by the people who manage the
collection, with check_source's errors as a 400 keyed by field, credentials write-only (never
in a response, encrypted at rest), Sync now queuing one run, the runs newest first. Members who
do not manage the collection get 403, everyone else 404."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from audit.models import Action, Entry
from knowledge.models import Role
from sources.actions import do_save_source
from sources.models import Source, SyncRun
from sources.remotes import Credentials
from tests.conftest import set_role, token_for

pytestmark = pytest.mark.usefixtures("media")

SECRET = "hunter2-Zq9!secret"


def _folder(collection, roots: Path, name: str = "Handbook share", **fields: Any) -> Source:
    source = Source(collection=collection, name=name, kind="folder", url=str(roots / "handbook"), **fields)
    return do_save_source(source, credentials=Credentials("reader", SECRET))


def _text(response: Any) -> str:
    return response.content.decode()


def test_an_owner_adds_reads_changes_and_removes_a_source(api, alice, private_collection, roots):
    token_for(api, alice)
    listing = reverse("collection-source-list", args=[private_collection.pk])
    payload = {
        "name": "Handbook share",
        "kind": "folder",
        "url": str(roots / "handbook"),
        "target": "handbook",
        "include": "*.md\ndocs/",
        "schedule": "6h",
        "username": "reader",
        "password": SECRET,
    }
    created = api.post(listing, payload, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert SECRET not in _text(created)
    assert "password" not in body
    assert "username" not in body
    assert "credentials_token" not in body
    assert body["has_credentials"] is True
    assert body["next_sync_at"] is not None
    assert body["last_run"] is None
    source = Source.objects.get(pk=body["id"])
    assert source.credentials_token
    assert SECRET not in source.credentials_token
    assert source.credentials() == Credentials("reader", SECRET)

    detail = reverse("source-detail", args=[source.pk])
    for response in (api.get(listing), api.get(detail)):
        assert response.status_code == 200
        assert SECRET not in _text(response)
        assert "reader" not in _text(response)
    assert api.get(listing).json()["results"][0]["name"] == "Handbook share"

    changed = api.patch(detail, {"schedule": "", "password": "new-" + SECRET}, format="json")
    assert changed.status_code == 200, changed.content
    assert SECRET not in _text(changed)
    assert changed.json()["next_sync_at"] is None
    source.refresh_from_db()
    assert source.credentials() == Credentials("reader", "new-" + SECRET)  # the user name is kept

    kept = api.patch(detail, {"exclude": "*.tmp", "username": "", "password": ""}, format="json")
    assert kept.status_code == 200
    source.refresh_from_db()
    assert source.credentials() == Credentials("reader", "new-" + SECRET)

    cleared = api.patch(detail, {"clear_credentials": True}, format="json")
    assert cleared.json()["has_credentials"] is False
    assert Source.objects.get(pk=source.pk).credentials_token == ""

    assert api.delete(detail).status_code == 204
    assert not Source.objects.filter(pk=source.pk).exists()
    entries = Entry.objects.filter(object_type="source", object_id=str(source.pk))
    actions = list(entries.values_list("action", flat=True))
    assert sorted(set(actions)) == sorted({Action.SOURCE_CREATE, Action.SOURCE_UPDATE, Action.SOURCE_DELETE})
    update = Entry.objects.filter(action=Action.SOURCE_UPDATE, object_id=str(source.pk)).order_by("pk").first()
    assert update is not None
    assert update.actor == alice
    assert SECRET not in str(list(Entry.objects.values_list("changes", flat=True)))


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"kind": "folder", "url": "/etc"}, "url"),
        ({"kind": "folder", "url": ""}, "url"),
        ({"kind": "git", "url": f"https://reader:{SECRET}@git.example.com/team/handbook.git"}, "url"),
        ({"kind": "webdav", "url": "ftp://files.example.com/"}, "url"),
        ({"kind": "s3", "bucket": "docs", "schedule": "every tuesday"}, "schedule"),
        ({"kind": "s3", "bucket": "docs", "schedule": "1m"}, "schedule"),
        ({"kind": "s3", "bucket": "docs", "schedule": "0 99 * * *"}, "schedule"),
        ({"kind": "s3", "bucket": "docs", "link_template": "https://git.example.com/{file}"}, "link_template"),
        ({"kind": "s3", "bucket": "docs", "link_template": "https://git.example.com/raw"}, "link_template"),
        ({"kind": "s3"}, "bucket"),
        ({"kind": "s3", "bucket": "docs", "target": "../up"}, "target"),
        ({"kind": "ftp"}, "kind"),
        ({"kind": "git", "url": "file:///etc"}, "url"),
        ({"kind": "git", "url": "file://other-host/srv/repo.git"}, "url"),
    ],
)
def test_it_answers_400_naming_the_field(api, alice, private_collection, roots, fields, field):
    token_for(api, alice)
    listing = reverse("collection-source-list", args=[private_collection.pk])
    response = api.post(listing, {"name": "Share", "password": SECRET, **fields}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert all(isinstance(message, str) for message in response.json()[field])
    assert SECRET not in _text(response)
    assert not Source.objects.exists()


@pytest.mark.parametrize("form", ["file://{path}", "file://localhost{path}", "{path}"])
def test_a_git_repository_on_the_server_is_saved_as_a_path_or_a_file_url(api, alice, private_collection, roots, form):
    """docs/sources.md: a Git repository may be a path under PORTAL_SOURCE_ROOTS, written as
    such or as a file:// URL; both are saved (a file:// URL used to be refused)."""
    token_for(api, alice)
    url = form.format(path=roots / "handbook")
    listing = reverse("collection-source-list", args=[private_collection.pk])
    response = api.post(listing, {"name": "Local repo", "kind": "git", "url": url}, format="json")
    assert response.status_code == 201, response.content
    assert Source.objects.get().url == url


def test_a_change_is_checked_too_and_a_name_is_unique(api, alice, private_collection, roots):
    token_for(api, alice)
    first = _folder(private_collection, roots)
    second = _folder(private_collection, roots, name="Second")
    response = api.patch(reverse("source-detail", args=[second.pk]), {"name": first.name}, format="json")
    assert response.status_code == 400
    assert "name" in response.json()
    response = api.patch(reverse("source-detail", args=[second.pk]), {"url": "/etc"}, format="json")
    assert response.status_code == 400
    assert "url" in response.json()
    second.refresh_from_db()
    assert second.name == "Second"
    assert second.url == str(roots / "handbook")


def test_sync_now_queues_one_run(api, alice, private_collection, roots, django_capture_on_commit_callbacks):
    token_for(api, alice)
    source = _folder(private_collection, roots)
    url = reverse("source-sync-api", args=[source.pk])
    with django_capture_on_commit_callbacks() as queued:
        first = api.post(url)
    assert first.status_code == 202, first.content
    assert first.json()["status"] == "queued"
    assert first.json()["trigger"] == "manual"
    assert first.json()["requested_by"] == alice.email
    assert len(queued) == 1  # sources.tasks.sync_source.delay, once the transaction commits
    again = api.post(url)
    assert again.status_code == 202
    assert again.json()["id"] == first.json()["id"]
    assert SyncRun.objects.filter(source=source).count() == 1
    assert Entry.objects.filter(action=Action.SOURCE_SYNC, object_id=str(source.pk), actor=alice).exists()
    assert api.get(reverse("source-detail", args=[source.pk])).json()["last_run"]["id"] == first.json()["id"]


def _finished(source: Source, **fields: Any) -> SyncRun:
    """A run as the engine leaves it (sources/sync.py is tested on its own)."""
    return SyncRun.objects.create(source=source, **{"status": SyncRun.Status.SUCCEEDED, **fields})


def test_runs_are_listed_newest_first_and_paged(api, alice, private_collection, roots):
    token_for(api, alice)
    source = _folder(private_collection, roots)
    other = _folder(private_collection, roots, name="Other")
    older = _finished(source, counts={"added": 3})
    newer = _finished(
        source,
        status=SyncRun.Status.FAILED,
        counts={"added": 1, "failed": 1},
        failures=[{"path": "big.pdf", "error": "larger than the upload limit"}],
    )
    elsewhere = _finished(other)
    runs = api.get(reverse("source-run-list", args=[source.pk]))
    assert runs.status_code == 200
    assert [run["id"] for run in runs.json()["results"]] == [newer.pk, older.pk]
    assert runs.json()["count"] == 2
    page = api.get(reverse("source-run-list", args=[source.pk]), {"limit": 1, "offset": 1})
    assert [run["id"] for run in page.json()["results"]] == [older.pk]
    one = api.get(reverse("source-run-detail", args=[source.pk, newer.pk]))
    assert one.status_code == 200
    assert one.json()["failures"] == [{"path": "big.pdf", "error": "larger than the upload limit"}]
    assert one.json()["counts"] == {"added": 1, "failed": 1}
    assert api.get(reverse("source-run-detail", args=[source.pk, elsewhere.pk])).status_code == 404


def _routes(collection_id: int, source: Source, run: SyncRun) -> list[tuple[str, str]]:
    detail = reverse("source-detail", args=[source.pk])
    return [
        ("get", reverse("collection-source-list", args=[collection_id])),
        ("post", reverse("collection-source-list", args=[collection_id])),
        ("get", detail),
        ("patch", detail),
        ("delete", detail),
        ("post", reverse("source-sync-api", args=[source.pk])),
        ("get", reverse("source-run-list", args=[source.pk])),
        ("get", reverse("source-run-detail", args=[source.pk, run.pk])),
    ]


@pytest.mark.parametrize("role", [Role.VIEWER, Role.EDITOR])
def test_members_who_do_not_manage_get_403(api, alice, bob, team, team_collection, roots, role):
    set_role(team, bob, role)
    source = _folder(team_collection, roots)
    run = _finished(source)
    token_for(api, bob)
    for method, url in _routes(team_collection.pk, source, run):
        response = getattr(api, method)(url, {"name": "Mine", "kind": "s3", "bucket": "b"}, format="json")
        assert response.status_code == 403, (method, url, response.status_code)
        assert SECRET not in _text(response)
        assert str(roots) not in _text(response)
    assert Source.objects.get(pk=source.pk).name == "Handbook share"
    assert SyncRun.objects.filter(source=source).count() == 1
    # A team admin manages the collection, so its sources.
    set_role(team, bob, Role.ADMIN)
    assert api.get(reverse("source-detail", args=[source.pk])).status_code == 200


def test_others_get_404(api, alice, bob, charlie, team, private_collection, roots):
    source = _folder(private_collection, roots)
    run = _finished(source)
    for user in (charlie, bob):  # bob is in alice's team, not in her private collection
        token_for(api, user)
        for method, url in _routes(private_collection.pk, source, run):
            response = getattr(api, method)(url, {"name": "Mine"}, format="json")
            assert response.status_code == 404, (user, method, url, response.status_code)
            assert "Handbook share" not in _text(response)
    assert Source.objects.filter(pk=source.pk).exists()

"""The sources admin: saved through sources.actions (checked, audited, credentials encrypted
and never shown), Sync now as an action, runs read only; staff see only the sources of the
collections they manage."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Permission

from audit.models import Action, Entry
from knowledge.actions import do_add_member
from knowledge.models import Role
from sources.actions import do_save_source
from sources.models import Source, SyncRun
from sources.remotes import Credentials
from tests.conftest import make_user

pytestmark = pytest.mark.usefixtures("media")

SECRET = "hunter2-Zq9!secret"


def _folder(collection, roots: Path) -> Source:
    source = Source(collection=collection, name="Handbook share", kind="folder", url=str(roots / "handbook"))
    return do_save_source(source, credentials=Credentials("reader", SECRET))


def test_a_superuser_adds_a_source_through_the_actions(admin_client, admin_user, private_collection, roots):
    form = {
        "collection": private_collection.pk,
        "name": "Handbook share",
        "kind": "folder",
        "url": str(roots / "handbook"),
        "enabled": "on",
        "username": "reader",
        "password": SECRET,
    }
    refused = admin_client.post("/admin/sources/source/add/", {**form, "url": "/etc", "schedule": "often"})
    assert refused.status_code == 200
    assert {"url", "schedule"} <= set(refused.context["adminform"].form.errors)
    assert SECRET not in refused.content.decode()
    response = admin_client.post("/admin/sources/source/add/", form)
    assert response.status_code == 302, response.context["adminform"].form.errors
    source = Source.objects.get()
    assert source.credentials() == Credentials("reader", SECRET)
    assert SECRET not in source.credentials_token
    assert Entry.objects.filter(action=Action.SOURCE_CREATE, object_id=str(source.pk), actor=admin_user).exists()
    page = admin_client.get(f"/admin/sources/source/{source.pk}/change/").content.decode()
    assert SECRET not in page
    assert "reader" not in page
    assert source.credentials_token not in page
    assert f"source__id__exact={source.pk}" in page
    assert admin_client.get(f"/admin/sources/syncrun/?source__id__exact={source.pk}").status_code == 200


def test_the_sync_now_action_queues_a_run(admin_client, admin_user, private_collection, roots):
    source = _folder(private_collection, roots)
    response = admin_client.post(
        "/admin/sources/source/", {"action": "sync_now", "_selected_action": [source.pk]}, follow=True
    )
    assert response.status_code == 200
    run = SyncRun.objects.get(source=source)
    assert run.trigger == SyncRun.Trigger.MANUAL
    assert run.requested_by == admin_user
    run_page = admin_client.get(f"/admin/sources/syncrun/{run.pk}/change/")
    assert run_page.status_code == 200
    assert 'name="_save"' not in run_page.content.decode()  # read only


def test_staff_see_only_the_sources_of_collections_they_manage(client, alice, team, team_collection, roots):
    source = _folder(team_collection, roots)
    staff = make_user("dana", is_staff=True)
    codenames = ["view_source", "change_source", "view_syncrun"]
    staff.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client.force_login(staff)
    assert client.get(f"/admin/sources/source/{source.pk}/change/").status_code == 404
    do_add_member(team, staff, Role.VIEWER)
    assert client.get(f"/admin/sources/source/{source.pk}/change/").status_code == 404
    assert "Handbook share" not in client.get("/admin/sources/source/").content.decode()
    team.memberships.filter(user=staff).update(role=Role.ADMIN)
    assert client.get(f"/admin/sources/source/{source.pk}/change/").status_code == 200


def test_the_admin_says_when_credentials_were_removed_by_a_change_of_address(admin_client, private_collection):
    source = Source(collection=private_collection, name="Share", kind="webdav", url="http://127.0.0.1:8001/dav/")
    do_save_source(source, credentials=Credentials("reader", SECRET))
    page = admin_client.get(f"/admin/sources/source/{source.pk}/change/").content.decode()
    assert "removed: the address changed" not in page
    source.url = "http://127.0.0.1:8002/dav/"
    do_save_source(source)
    assert not source.has_credentials
    assert source.credentials_cleared
    page = admin_client.get(f"/admin/sources/source/{source.pk}/change/").content.decode()
    assert "removed: the address changed" in page
    assert SECRET not in page

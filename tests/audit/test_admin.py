"""Operators' changes in the Django admin leave the same audit entries as the pages' and
the API's, and open sockets hear of memberships taken away there too."""

from __future__ import annotations

import os

import pytest

from audit.models import Action, Entry
from ingestion.actions import do_add_document
from knowledge.models import Collection, Document, Membership
from knowledge.revocation import generation

pytestmark = pytest.mark.usefixtures("media")


def _actions() -> list[str]:
    return list(Entry.objects.order_by("pk").values_list("action", flat=True))


def test_a_role_changed_and_a_member_removed_in_the_admin_are_recorded(
    admin_client, admin_user, bob, team, django_capture_on_commit_callbacks
):
    membership = Membership.objects.get(team=team, user=bob)
    before, start = generation(bob.pk), Entry.objects.count()
    url = f"/admin/knowledge/membership/{membership.pk}/change/"
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(url, {"team": team.pk, "user": bob.pk, "role": "editor"})
        assert response.status_code == 302
        response = admin_client.post(f"/admin/knowledge/membership/{membership.pk}/delete/", {"post": "yes"})
        assert response.status_code == 302
    assert generation(bob.pk) == before + 2  # bob's open sockets check again, twice
    assert not Membership.objects.filter(pk=membership.pk).exists()
    entries = list(Entry.objects.order_by("pk")[start:])
    assert [(e.action, e.changes, e.actor_id) for e in entries] == [
        (Action.MEMBER_ROLE, {"role": ["viewer", "editor"]}, admin_user.pk),
        (Action.MEMBER_REMOVE, {"role": ["editor", None]}, admin_user.pk),
    ]
    assert entries[0].ip == "127.0.0.1"


def test_a_collection_deleted_in_the_admin_goes_through_the_action(
    admin_client, team_collection, django_capture_on_commit_callbacks
):
    document, _run = do_add_document(team_collection, "a.md", b"# A\n\ntext", enqueue=False)
    stored = document.file.path
    with django_capture_on_commit_callbacks(execute=True):  # the files go once the delete commits
        response = admin_client.post(f"/admin/knowledge/document/{document.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Document.objects.filter(pk=document.pk).exists()
    response = admin_client.post(f"/admin/knowledge/collection/{team_collection.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Collection.objects.filter(pk=team_collection.pk).exists()
    assert _actions()[-2:] == [Action.DOCUMENT_DELETE, Action.COLLECTION_DELETE]
    assert not os.path.exists(stored)


def test_members_edited_on_the_team_page_of_the_admin_are_recorded(admin_client, alice, bob, charlie, team):
    rows = list(Membership.objects.filter(team=team).order_by("pk"))
    data = {
        "name": team.name,
        "description": "",
        "memberships-TOTAL_FORMS": str(len(rows) + 1),
        "memberships-INITIAL_FORMS": str(len(rows)),
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
    }
    for n, row in enumerate(rows):
        role = "editor" if row.user_id == bob.pk else row.role
        data |= {f"memberships-{n}-id": row.pk, f"memberships-{n}-team": team.pk, f"memberships-{n}-user": row.user_id}
        data[f"memberships-{n}-role"] = role
    n = len(rows)
    data |= {f"memberships-{n}-team": team.pk, f"memberships-{n}-user": charlie.pk, f"memberships-{n}-role": "viewer"}
    start = Entry.objects.count()
    response = admin_client.post(f"/admin/knowledge/team/{team.pk}/change/", data)
    assert response.status_code == 302, response.content.decode()[:2000]
    recorded = {(e.action, e.object_label) for e in Entry.objects.order_by("pk")[start:]}
    assert recorded == {
        (Action.MEMBER_ADD, "charlie@example.com in Research (viewer)"),
        (Action.MEMBER_ROLE, "bob@example.com in Research (editor)"),
    }


def test_deactivating_an_account_is_announced_to_its_sockets(bob, django_capture_on_commit_callbacks):
    before = generation(bob.pk)
    with django_capture_on_commit_callbacks(execute=True):
        bob.first_name = "Bob"
        bob.save()
    assert generation(bob.pk) == before  # nothing taken away
    with django_capture_on_commit_callbacks(execute=True):
        bob.is_active = False
        bob.save()
    assert generation(bob.pk) == before + 1

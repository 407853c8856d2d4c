"""Renaming and deleting a team through the API: team admins only, one audit entry each,
and a delete takes the team's collections (with their stored files) the way deleting each
collection would."""

from __future__ import annotations

import os

import pytest

from audit.models import Action, Entry
from ingestion.actions import do_add_document
from knowledge import actions
from knowledge.models import Collection, Document, Membership, PageImage, Role, Team
from knowledge.revocation import generation
from tests.conftest import make_collection, set_role

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]


def _entries_after(mark: int) -> list[Entry]:
    return list(Entry.objects.filter(pk__gt=mark).order_by("pk"))


def _mark() -> int:
    return Entry.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def test_it_records_a_rename_with_its_change(api, alice, team):
    api.force_login(alice)
    mark = _mark()
    response = api.patch(
        f"/api/teams/{team.pk}/", {"name": "  Research   lab ", "description": "Papers"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["name"] == "Research lab"
    team.refresh_from_db()
    assert (team.name, team.description) == ("Research lab", "Papers")
    entries = _entries_after(mark)
    assert [(e.action, e.changes, e.team_id, e.actor_id) for e in entries] == [
        (Action.TEAM_UPDATE, {"name": ["Research", "Research lab"], "description": ["", "Papers"]}, team.pk, alice.pk)
    ]
    assert entries[0].object_label == "Research lab"


def test_it_records_nothing_when_nothing_changed(api, alice, team):
    api.force_login(alice)
    mark = _mark()
    response = api.patch(f"/api/teams/{team.pk}/", {"name": "Research", "description": ""}, format="json")
    assert response.status_code == 200
    assert _entries_after(mark) == []


@pytest.mark.parametrize(
    "name",
    [
        "a\u202eb",  # would show as "ab" reversed around it
        "Guild",  # another team's
        "guild",  # the same in another case
        "",
        "   ",
        "\u200b",  # nothing visible
    ],
)
def test_it_refuses_a_bad_name_and_records_nothing(api, alice, team, name):
    actions.do_create_team(alice, "Guild")
    api.force_login(alice)
    mark = _mark()
    response = api.patch(f"/api/teams/{team.pk}/", {"name": name}, format="json")
    assert response.status_code == 400, response.content
    team.refresh_from_db()
    assert team.name == "Research"
    assert _entries_after(mark) == []


@pytest.mark.parametrize("role", [Role.VIEWER, Role.EDITOR])
def test_only_a_team_admin_renames_or_deletes_the_team(api, bob, team, team_collection, role):
    set_role(team, bob, role)
    api.force_login(bob)
    mark = _mark()
    url = f"/api/teams/{team.pk}/"
    assert api.patch(url, {"name": "Bob's"}, format="json").status_code == 403
    assert api.delete(url).status_code == 403
    assert Team.objects.get(pk=team.pk).name == "Research"
    assert Collection.objects.filter(pk=team_collection.pk).exists()
    assert _entries_after(mark) == []


def test_a_stranger_gets_404(api, charlie, team):
    api.force_login(charlie)
    mark = _mark()
    url = f"/api/teams/{team.pk}/"
    assert api.patch(url, {"name": "Charlie's"}, format="json").status_code == 404
    assert api.delete(url).status_code == 404
    assert Team.objects.get(pk=team.pk).name == "Research"
    assert _entries_after(mark) == []


def test_a_delete_takes_the_collections_and_their_files(
    api, alice, bob, team, team_collection, private_collection, django_capture_on_commit_callbacks
):
    other = make_collection(alice, "Team notes", team=team)
    document, _run = do_add_document(team_collection, "guide.md", b"# Guide\n\nHello.", enqueue=False)
    kept, _run = do_add_document(private_collection, "mine.md", b"# Mine\n\nHello.", enqueue=False)
    stored, kept_stored = document.file.path, kept.file.path
    assert os.path.exists(stored)
    before = {user.pk: generation(user.pk) for user in (alice, bob)}
    api.force_login(alice)
    mark = _mark()
    with django_capture_on_commit_callbacks(execute=True):
        response = api.delete(f"/api/teams/{team.pk}/")
    assert response.status_code == 204
    assert not Team.objects.filter(pk=team.pk).exists()
    assert not Collection.objects.filter(pk__in=[team_collection.pk, other.pk]).exists()
    assert not Document.objects.filter(pk=document.pk).exists()
    assert not Membership.objects.filter(team_id=team.pk).exists()
    assert not os.path.exists(stored)
    assert os.path.exists(kept_stored)  # alice's own collection is not the team's
    entries = _entries_after(mark)
    assert sorted((e.action, e.object_id, e.team_id) for e in entries) == sorted(
        [
            (Action.COLLECTION_DELETE, str(team_collection.pk), team.pk),
            (Action.COLLECTION_DELETE, str(other.pk), team.pk),
            (Action.TEAM_DELETE, str(team.pk), team.pk),
        ]
    )
    assert entries[-1].action == Action.TEAM_DELETE
    assert entries[-1].object_label == "Research"
    assert {e.actor_id for e in entries} == {alice.pk}
    for user in (alice, bob):  # every member's open sockets check again
        assert generation(user.pk) > before[user.pk]


def test_a_delete_tells_every_members_sockets_without_collections_too(
    api, alice, bob, team, django_capture_on_commit_callbacks
):
    before = generation(bob.pk)
    api.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        assert api.delete(f"/api/teams/{team.pk}/").status_code == 204
    assert generation(bob.pk) == before + 1


def test_a_collection_delete_removes_its_documents_files(alice, private_collection, django_capture_on_commit_callbacks):
    document, _run = do_add_document(private_collection, "notes.md", b"# Notes\n\nHello.", enqueue=False)
    stored = document.file.path
    assert not PageImage.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        actions.do_delete_collection(private_collection)
    assert not os.path.exists(stored)


def test_a_failed_delete_keeps_the_team_its_collections_and_files(
    alice, team, team_collection, monkeypatch, django_capture_on_commit_callbacks
):
    document, _run = do_add_document(team_collection, "guide.md", b"# Guide", enqueue=False)
    stored = document.file.path

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("connection lost")

    monkeypatch.setattr(Team, "delete", fail)
    mark = _mark()
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError):
        actions.do_delete_team(team)
    assert Collection.objects.filter(pk=team_collection.pk).exists()
    assert os.path.exists(stored)
    assert _entries_after(mark) == []


def test_the_admin_renames_and_deletes_through_the_actions(
    admin_client, admin_user, alice, team, team_collection, django_capture_on_commit_callbacks
):
    actions.do_create_team(alice, "Guild")
    document, _run = do_add_document(team_collection, "guide.md", b"# Guide", enqueue=False)
    stored = document.file.path
    rows = list(Membership.objects.filter(team=team).order_by("pk"))
    data: dict[str, object] = {
        "memberships-TOTAL_FORMS": str(len(rows)),
        "memberships-INITIAL_FORMS": str(len(rows)),
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
    }
    for n, row in enumerate(rows):
        data |= {f"memberships-{n}-id": row.pk, f"memberships-{n}-team": team.pk, f"memberships-{n}-user": row.user_id}
        data[f"memberships-{n}-role"] = row.role
    url = f"/admin/knowledge/team/{team.pk}/change/"
    mark = _mark()
    refused = admin_client.post(url, {**data, "name": "GUILD", "description": ""})
    assert refused.status_code == 200  # the form again, with the error
    assert "already exists" in refused.content.decode()
    assert admin_client.post(url, {**data, "name": "Lab", "description": ""}).status_code == 302
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(f"/admin/knowledge/team/{team.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Team.objects.filter(pk=team.pk).exists()
    assert not os.path.exists(stored)
    entries = _entries_after(mark)
    assert [(e.action, e.changes, e.actor_id) for e in entries] == [
        (Action.TEAM_UPDATE, {"name": ["Research", "Lab"]}, admin_user.pk),
        (Action.COLLECTION_DELETE, {}, admin_user.pk),
        (Action.TEAM_DELETE, {}, admin_user.pk),
    ]

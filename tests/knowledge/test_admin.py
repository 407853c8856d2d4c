from __future__ import annotations

from django.contrib.auth.models import Permission

from tests.conftest import make_user


def _staff_with_collection_perms(name: str):
    user = make_user(name, is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_collection", "change_collection"]))
    return user


def test_it_gives_staff_charlie_404_for_alices_collection(client, db, private_collection):
    client.force_login(_staff_with_collection_perms("charlie-staff"))
    url = f"/admin/knowledge/collection/{private_collection.pk}/change/"
    assert client.get(url).status_code == 404
    listing = client.get("/admin/knowledge/collection/").content.decode()
    assert "Alice&#x27;s notes" not in listing


def test_it_sends_non_staff_to_the_admin_login(client, charlie, private_collection):
    client.force_login(charlie)
    response = client.get(f"/admin/knowledge/collection/{private_collection.pk}/change/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_it_shows_staff_their_own_team_collections(client, db, alice, team, team_collection, private_collection):
    from knowledge.actions import do_add_member
    from knowledge.models import Role

    staff = _staff_with_collection_perms("dana")
    do_add_member(team, staff, Role.VIEWER)
    client.force_login(staff)
    assert client.get(f"/admin/knowledge/collection/{team_collection.pk}/change/").status_code == 200
    assert client.get(f"/admin/knowledge/collection/{private_collection.pk}/change/").status_code == 404


def test_it_shows_superusers_everything(admin_client, private_collection, team_collection):
    for collection in (private_collection, team_collection):
        assert admin_client.get(f"/admin/knowledge/collection/{collection.pk}/change/").status_code == 200
    for path in (
        "/admin/portal/user/",
        "/admin/knowledge/team/",
        "/admin/knowledge/membership/",
        "/admin/knowledge/apitoken/",
        "/admin/knowledge/document/",
        "/admin/knowledge/indexversion/",
        "/admin/ingestion/ingestionrun/",
    ):
        assert admin_client.get(path).status_code == 200

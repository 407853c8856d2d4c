from __future__ import annotations

import pytest

from knowledge.models import ApiToken, Collection, Role
from tests.conftest import make_collection, set_role, token_for


def test_it_needs_authentication(api, private_collection):
    assert api.get("/api/collections/").status_code == 401
    api.credentials(HTTP_AUTHORIZATION="Token kp_not-a-real-key")
    assert api.get("/api/collections/").status_code == 401


def test_it_lists_only_visible_collections_in_constant_queries(api, alice, bob, team, django_assert_num_queries):
    for n in range(5):
        make_collection(alice, f"Mine {n}")
        make_collection(alice, f"Team {n}", team=team)
    api.force_login(bob)
    with django_assert_num_queries(4):  # session, user, count, page
        response = api.get("/api/collections/")
    assert response.status_code == 200
    names = {row["name"] for row in response.json()["results"]}
    assert names == {f"Team {n}" for n in range(5)}


def test_it_gives_charlie_404_for_alices_collection(api, charlie, private_collection, team_collection):
    token_for(api, charlie)
    for collection in (private_collection, team_collection):
        url = f"/api/collections/{collection.pk}/"
        assert api.get(url).status_code == 404
        assert api.patch(url, {"name": "pwned"}, format="json").status_code == 404
        assert api.delete(url).status_code == 404
    assert Collection.objects.filter(name="pwned").count() == 0


def test_it_lets_a_viewer_read_but_not_change(api, bob, team, team_collection):
    token_for(api, bob)
    url = f"/api/collections/{team_collection.pk}/"
    assert api.get(url).json()["name"] == "Team handbook"
    assert api.patch(url, {"name": "Nope"}, format="json").status_code == 403
    assert api.delete(url).status_code == 403
    set_role(team, bob, Role.EDITOR)
    assert api.patch(url, {"name": "Yes"}, format="json").json()["name"] == "Yes"
    assert api.delete(url).status_code == 403
    set_role(team, bob, Role.ADMIN)
    assert api.delete(url).status_code == 204


def test_it_creates_collections_for_self_or_own_team(api, bob, charlie, team):
    token_for(api, charlie)
    response = api.post("/api/collections/", {"name": "Sneaky", "team": team.pk}, format="json")
    assert response.status_code == 400  # charlie's view of the team: it does not exist
    token_for(api, bob)
    assert api.post("/api/collections/", {"name": "Viewer's", "team": team.pk}, format="json").status_code == 403
    set_role(team, bob, Role.EDITOR)
    created = api.post("/api/collections/", {"name": "Bob's team notes", "team": team.pk}, format="json")
    assert created.status_code == 201
    assert created.json()["team"] == team.pk
    private = api.post("/api/collections/", {"name": "Bob's"}, format="json").json()
    assert Collection.objects.get(pk=private["id"]).owner_user == bob
    duplicate = api.post("/api/collections/", {"name": "Bob's"}, format="json")
    assert duplicate.status_code == 400
    assert "already exists" in str(duplicate.json())


def test_it_reads_bodies_as_json_and_keeps_their_types(api, alice, team):
    """The schema's types hold: a form body is refused (it would turn every value into text),
    "" is no team, and read-only fields sent are ignored."""
    token_for(api, alice)
    form = api.post("/api/collections/", {"name": "Form", "team": ""}, format="multipart")
    assert form.status_code == 415
    empty_team = api.post("/api/collections/", {"name": "Empty team", "team": ""}, format="json")
    assert empty_team.status_code == 400
    assert "team" in empty_team.json()
    sent = {"name": "Typed", "team": None, "updated_at": "2001-01-01T00:00:00Z", "owner": "bob@example.com"}
    created = api.post("/api/collections/", sent, format="json")
    assert created.status_code == 201
    assert created.json()["owner"] == "alice@example.com"
    assert not created.json()["updated_at"].startswith("2001")
    assert not Collection.objects.filter(name__in=["Form", "Empty team"]).exists()


def test_it_manages_team_members_by_role(api, alice, bob, charlie, team):
    token_for(api, bob)
    members = f"/api/teams/{team.pk}/members/"
    assert {m["email"] for m in api.get(members).json()["results"]} == {"alice@example.com", "bob@example.com"}
    assert api.post(members, {"email": "charlie@example.com"}, format="json").status_code == 403
    token_for(api, alice)
    invited = api.post(members, {"email": "charlie@example.com", "role": "editor"}, format="json")
    assert invited.status_code == 201
    assert (invited.json()["role"], invited.json()["status"]) == ("editor", "pending")
    token_for(api, charlie)
    added = api.post(f"/api/invitations/{invited.json()['id']}/accept/")
    assert added.status_code == 200
    assert added.json()["role"] == "editor"
    token_for(api, alice)
    changed = api.patch(f"{members}{added.json()['id']}/", {"role": "viewer"}, format="json")
    assert changed.json()["role"] == "viewer"
    assert api.post(members, {"email": "not an address"}, format="json").status_code == 400
    alice_id = team.memberships.get(user=alice).pk
    last_admin = api.patch(f"{members}{alice_id}/", {"role": "viewer"}, format="json")
    assert last_admin.status_code == 400
    assert "admin" in str(last_admin.json())
    token_for(api, charlie)  # now a viewer: may list but not remove
    assert api.delete(f"{members}{alice_id}/").status_code == 403


def test_it_hides_teams_from_strangers(api, charlie, team):
    token_for(api, charlie)
    assert api.get("/api/teams/").json()["results"] == []
    assert api.get(f"/api/teams/{team.pk}/").status_code == 404
    assert api.get(f"/api/teams/{team.pk}/members/").status_code == 404
    assert api.patch(f"/api/teams/{team.pk}/", {"name": "Mine"}, format="json").status_code == 404


def test_it_creates_a_team_with_its_creator_as_admin(api, charlie):
    token_for(api, charlie)
    team = api.post("/api/teams/", {"name": "Charlie's crew"}, format="json").json()
    assert team["my_role"] == "admin"


def test_it_issues_and_revokes_tokens(api, alice, charlie):
    api.force_login(alice)
    created = api.post("/api/tokens/", {"name": "Zapier"}, format="json").json()
    assert created["key"].startswith("kp_")
    assert "key" not in api.get(f"/api/tokens/{created['id']}/").json()
    api.logout()
    api.credentials(HTTP_AUTHORIZATION=f"Token {created['key']}")
    assert api.get("/api/collections/").status_code == 200
    token_for(api, charlie)
    assert api.delete(f"/api/tokens/{created['id']}/").status_code == 404
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {created['key']}")
    assert api.delete(f"/api/tokens/{created['id']}/").status_code == 204
    assert api.get("/api/collections/").status_code == 401
    assert ApiToken.objects.get(pk=created["id"]).revoked_at is not None


@pytest.mark.parametrize("path", ["/api/schema/", "/api/docs/"])
def test_it_serves_the_schema_and_docs(client, path):
    response = client.get(path)
    assert response.status_code == 200
    if path == "/api/schema/":
        body = response.content.decode()
        assert "/api/collections/" in body
        assert "tokenAuth" in body

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.urls import reverse

from knowledge.models import ApiToken, Collection, Role
from tests.conftest import PASSWORD, set_role
from tests.hardening.test_signup_enumeration import confirm_link


def test_it_logs_in_by_email_and_shows_the_dashboard(client, alice, private_collection):
    response = client.post(reverse("account_login"), {"login": "alice@example.com", "password": PASSWORD})
    assert response.status_code == 302
    page = client.get(reverse("dashboard"))
    assert page.status_code == 200
    assert "Alice&#x27;s notes" in page.content.decode()


def test_it_sends_anonymous_visitors_to_login(client, private_collection):
    response = client.get(reverse("collection", args=[private_collection.pk]))
    assert response.status_code == 302
    assert reverse("account_login") in response["Location"]


def test_it_signs_up_a_new_user(client, db):
    response = client.post(
        reverse("account_signup"),
        {"email": "dora@example.com", "password1": PASSWORD, "password2": PASSWORD},
    )
    assert response.status_code == 302
    # In once the address is confirmed from the mail (tests/hardening/test_signup_enumeration.py).
    assert client.get(reverse("dashboard")).status_code == 302
    client.post(confirm_link(mail.outbox[-1]))
    assert client.get(reverse("dashboard")).status_code == 200


def test_it_refuses_signup_when_disabled(client, db, settings):
    settings.SIGNUP_ENABLED = False
    response = client.post(
        reverse("account_signup"), {"email": "eve@example.com", "password1": PASSWORD, "password2": PASSWORD}
    )
    assert "Sign Up Closed" in response.content.decode()
    assert not get_user_model().objects.filter(email="eve@example.com").exists()
    assert 'href="/accounts/signup/"' not in client.get(reverse("dashboard"), follow=True).content.decode()


def test_it_creates_renames_and_deletes_a_collection(client, alice):
    client.force_login(alice)
    response = client.post(reverse("collection-create"), {"name": "研究 notes", "description": ""})
    collection = Collection.objects.get(name="研究 notes")
    assert response.status_code == 302
    assert collection.owner_user == alice
    client.post(reverse("collection-rename", args=[collection.pk]), {"name": "Renamed", "description": "x"})
    collection.refresh_from_db()
    assert collection.name == "Renamed"
    client.post(reverse("collection-delete", args=[collection.pk]))
    assert not Collection.objects.filter(pk=collection.pk).exists()


def test_it_shows_a_readable_error_for_a_duplicate_name(client, alice, private_collection):
    client.force_login(alice)
    response = client.post(reverse("collection-create"), {"name": private_collection.name})
    assert response.status_code == 400
    assert "already exists" in response.content.decode()


@pytest.mark.parametrize("name", ["collection", "collection-delete"])
def test_it_gives_charlie_404_for_alices_collection_pages(client, charlie, private_collection, name):
    client.force_login(charlie)
    assert client.get(reverse(name, args=[private_collection.pk])).status_code == 404
    assert client.post(reverse(name, args=[private_collection.pk])).status_code in (404, 405)
    assert client.post(reverse("collection-rename", args=[private_collection.pk]), {"name": "x"}).status_code == 404
    assert Collection.objects.get(pk=private_collection.pk).name == "Alice's notes"


def test_it_lets_a_viewer_read_but_not_change(client, bob, team_collection):
    client.force_login(bob)
    page = client.get(reverse("collection", args=[team_collection.pk]))
    assert page.status_code == 200
    assert "Team handbook" in page.content.decode()
    assert client.post(reverse("collection-rename", args=[team_collection.pk]), {"name": "x"}).status_code == 403
    assert client.post(reverse("collection-delete", args=[team_collection.pk])).status_code == 403
    assert Collection.objects.filter(pk=team_collection.pk, name="Team handbook").exists()


def test_it_lets_an_editor_rename_but_not_delete(client, bob, team, team_collection):
    set_role(team, bob, Role.EDITOR)
    client.force_login(bob)
    response = client.post(reverse("collection-rename", args=[team_collection.pk]), {"name": "Edited"})
    assert response.status_code == 302
    assert Collection.objects.get(pk=team_collection.pk).name == "Edited"
    assert client.post(reverse("collection-delete", args=[team_collection.pk])).status_code == 403


def test_it_lets_team_admins_manage_members(client, alice, bob, charlie, team):
    client.force_login(alice)
    response = client.post(reverse("team", args=[team.pk]), {"email": "charlie@example.com", "role": "editor"})
    assert response.status_code == 302
    assert not team.memberships.filter(user=charlie).exists()  # invited: a member once he accepts
    client.force_login(charlie)
    invitation = team.invitations.get(email="charlie@example.com")
    assert client.post(reverse("accept-invitation", args=[invitation.pk])).status_code == 302
    client.force_login(alice)
    membership = team.memberships.get(user=charlie)
    assert membership.role == Role.EDITOR
    client.post(reverse("member-role", args=[team.pk, membership.pk]), {"role": "viewer"})
    assert team.memberships.get(user=charlie).role == Role.VIEWER
    client.post(reverse("member-remove", args=[team.pk, membership.pk]))
    assert not team.memberships.filter(user=charlie).exists()


def test_it_stops_viewers_and_strangers_managing_members(client, bob, charlie, team):
    client.force_login(bob)
    membership = team.memberships.get(user=bob)
    assert client.post(reverse("team", args=[team.pk]), {"email": "charlie@example.com"}).status_code == 403
    assert client.post(reverse("member-role", args=[team.pk, membership.pk]), {"role": "admin"}).status_code == 403
    client.force_login(charlie)
    assert client.get(reverse("team", args=[team.pk])).status_code == 404
    assert team.memberships.get(user=bob).role == Role.VIEWER


def test_it_creates_and_revokes_tokens_shown_once(client, alice, charlie):
    client.force_login(alice)
    page = client.post(reverse("tokens"), {"name": "CI"}).content.decode()
    token = ApiToken.objects.get(user=alice)
    assert "kp_" in page
    assert token.prefix in page
    assert "kp_" not in client.get(reverse("tokens")).content.decode().replace(token.prefix, "")
    client.force_login(charlie)
    assert client.post(reverse("token-revoke", args=[token.pk])).status_code == 404
    client.force_login(alice)
    client.post(reverse("token-revoke", args=[token.pk]))
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_it_renders_pages_in_chinese(client, alice):
    client.force_login(alice)
    client.cookies["django_language"] = "zh-hans"
    page = client.get(reverse("dashboard")).content.decode()
    assert 'lang="zh-hans"' in page
    assert "新建知识库" in page


def test_the_dashboard_counts_each_collections_documents_by_status(client, alice, bob, private_collection):
    from ingestion import actions
    from knowledge.models import Document

    for name in ("a.md", "b.md", "c.md"):
        actions.do_add_document(private_collection, name, f"# {name}".encode(), enqueue=False)
    Document.objects.filter(name="a.md").update(status=Document.Status.READY)
    Document.objects.filter(name="b.md").update(status=Document.Status.FAILED)
    client.force_login(alice)
    row = client.get(reverse("dashboard")).content.decode().split("Alice&#x27;s notes", 1)[1].split("</tr>", 1)[0]
    assert '<td class="count">3</td>' in row
    assert "Indexing: 1" in row
    assert "Failed: 1" in row
    assert "All ready" not in row
    client.force_login(bob)
    assert "Alice&#x27;s notes" not in client.get(reverse("dashboard")).content.decode()

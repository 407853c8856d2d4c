"""Invitations: nobody becomes a member of a team without accepting, and the answer to an
invitation never tells whether the address has an account."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from assistant.retrieval.scope import scope_for
from audit.models import Action, Entry
from knowledge import actions
from knowledge.models import Invitation, Membership, Role
from tests.conftest import make_collection, make_user, set_role, token_for
from tests.hardening.test_signup_enumeration import confirm_link

pytestmark = pytest.mark.django_db


def _members(team) -> set[str]:
    return set(team.memberships.values_list("user__email", flat=True))


def _invite_over_api(api, team, email: str, role: str = "viewer"):
    return api.post(f"/api/teams/{team.pk}/members/", {"email": email, "role": role}, format="json")


def test_adding_a_member_invites_and_makes_nobody_a_member(api, alice, charlie, team):
    api.force_login(alice)
    response = _invite_over_api(api, team, "charlie@example.com", "editor")
    assert response.status_code == 201
    assert response.json()["status"] == "pending"
    assert "charlie@example.com" not in _members(team)
    assert Invitation.objects.get(team=team, email="charlie@example.com").role == "editor"


def test_a_known_and_an_unknown_address_get_the_same_answer(
    api, client, alice, charlie, team, django_capture_on_commit_callbacks
):
    """Status, keys and every value but the id, the address and the times are equal."""
    api.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        answers = [_invite_over_api(api, team, email) for email in ("charlie@example.com", "nobody@example.com")]
    assert [a.status_code for a in answers] == [201, 201]
    bodies = [a.json() for a in answers]
    assert bodies[0].keys() == bodies[1].keys()
    varying = {"id", "email", "created_at", "sent_at", "expires_at"}
    assert {k: v for k, v in bodies[0].items() if k not in varying} == {
        k: v for k, v in bodies[1].items() if k not in varying
    }
    # Both were mailed, with the same words.
    assert sorted(m.to[0] for m in mail.outbox) == ["charlie@example.com", "nobody@example.com"]
    assert mail.outbox[0].body.replace("charlie", "X") == mail.outbox[1].body.replace("nobody", "X")
    # The page says the same too.
    client.force_login(alice)
    pages = [
        client.post(reverse("team", args=[team.pk]), {"email": email, "role": "viewer"}, follow=True)
        for email in ("charlie2@example.com", "nobody2@example.com")
    ]
    make_user("charlie2")
    texts = [p.content.decode().replace("charlie2", "X").replace("nobody2", "X") for p in pages]
    assert [p.status_code for p in pages] == [200, 200]
    assert "Invitation sent to X@example.com" in texts[0]


def test_an_attacker_cannot_make_anyone_a_member(api, client, alice, bob, charlie, team):
    """charlie is no member: the team does not exist for him; bob, a viewer or editor, may
    not invite. An admin's invitation still makes no one a member."""
    token_for(api, charlie)
    assert _invite_over_api(api, team, "bob@example.com").status_code == 404
    assert api.post(f"/api/teams/{team.pk}/invitations/", {"email": "x@example.com"}).status_code == 404
    for role in (Role.VIEWER, Role.EDITOR):
        set_role(team, bob, role)
        token_for(api, bob)
        assert _invite_over_api(api, team, "charlie@example.com").status_code == 403
        client.force_login(bob)
        page = client.post(reverse("team", args=[team.pk]), {"email": "charlie@example.com", "role": "admin"})
        assert page.status_code == 403
    assert not Invitation.objects.exists()
    assert _members(team) == {"alice@example.com", "bob@example.com"}


def test_the_invitee_accepts_over_the_api_and_joins_with_the_role(api, alice, charlie, team):
    invitation = actions.do_invite(team, "Charlie@Example.com", Role.EDITOR, alice)
    token_for(api, charlie)
    listed = api.get("/api/invitations/").json()["results"]
    assert [(i["id"], i["team_name"], i["role"]) for i in listed] == [(invitation.pk, "Research", "editor")]
    response = api.post(f"/api/invitations/{invitation.pk}/accept/")
    assert response.status_code == 200, response.content
    assert Membership.objects.get(team=team, user=charlie).role == "editor"
    assert api.get("/api/invitations/").json()["results"] == []
    again = api.post(f"/api/invitations/{invitation.pk}/accept/")
    assert again.status_code == 400


def test_the_invitee_declines_on_the_page(client, alice, charlie, team):
    invitation = actions.do_invite(team, "charlie@example.com", Role.VIEWER, alice)
    client.force_login(charlie)
    page = client.get(reverse("invitations"))
    assert "Research" in page.content.decode()
    assert "1 invitation" in client.get(reverse("dashboard")).content.decode()
    response = client.post(reverse("decline-invitation", args=[invitation.pk]))
    assert response.status_code == 302
    invitation.refresh_from_db()
    assert invitation.status == "declined"
    assert "charlie@example.com" not in _members(team)


def test_only_the_invitee_may_answer(api, client, alice, bob, charlie, team):
    invitation = actions.do_invite(team, "charlie@example.com", Role.ADMIN, alice)
    for user in (alice, bob):  # the inviter and another member: not theirs to answer
        token_for(api, user)
        assert api.post(f"/api/invitations/{invitation.pk}/accept/").status_code == 404
        assert api.get(f"/api/invitations/{invitation.pk}/").status_code == 404
        client.force_login(user)
        assert client.post(reverse("accept-invitation", args=[invitation.pk])).status_code == 404
    assert Membership.objects.get(team=team, user=bob).role == "viewer"
    assert Invitation.objects.get(pk=invitation.pk).status == "pending"


def test_an_address_without_an_account_accepts_after_signing_up(client, alice, team):
    invitation = actions.do_invite(team, "newcomer@example.com", Role.VIEWER, alice)
    response = client.post(
        reverse("account_signup"),
        {"email": "newcomer@example.com", "password1": "a long pass phrase 42", "password2": "a long pass phrase 42"},
    )
    assert response.status_code == 302
    [confirmation] = [m for m in mail.outbox if "/accounts/confirm-email/" in str(m.body)]
    client.post(confirm_link(confirmation))  # a signed-up address is confirmed before it logs in
    assert "Research" in client.get(reverse("invitations")).content.decode()
    client.post(reverse("accept-invitation", args=[invitation.pk]))
    assert "newcomer@example.com" in _members(team)


def test_expired_and_revoked_invitations_cannot_be_accepted(api, alice, charlie, team):
    invitation = actions.do_invite(team, "charlie@example.com", Role.VIEWER, alice)
    Invitation.objects.filter(pk=invitation.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    token_for(api, charlie)
    assert api.get("/api/invitations/").json()["results"] == []
    response = api.post(f"/api/invitations/{invitation.pk}/accept/")
    assert response.status_code == 400
    assert "expired" in str(response.json())
    # Sent again: open for another PORTAL_INVITATION_DAYS, and accepted.
    api.force_login(alice)
    api.credentials()
    resent = api.post(f"/api/teams/{team.pk}/invitations/{invitation.pk}/resend/")
    assert resent.status_code == 200
    assert resent.json()["status"] == "pending"
    assert api.delete(f"/api/teams/{team.pk}/invitations/{invitation.pk}/").status_code == 204
    token_for(api, charlie)
    assert api.post(f"/api/invitations/{invitation.pk}/accept/").status_code == 400
    assert "charlie@example.com" not in _members(team)


def test_team_admins_list_resend_and_revoke(client, alice, team, django_capture_on_commit_callbacks):
    invitation = actions.do_invite(team, "someone@example.com", Role.VIEWER, alice)
    mail.outbox.clear()
    client.force_login(alice)
    page = client.get(reverse("team", args=[team.pk])).content.decode()
    assert "someone@example.com" in page
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("resend-invitation", args=[team.pk, invitation.pk]))
    assert [m.to for m in mail.outbox] == [["someone@example.com"]]
    client.post(reverse("revoke-invitation", args=[team.pk, invitation.pk]))
    assert Invitation.objects.get(pk=invitation.pk).status == "revoked"
    assert "someone@example.com" not in client.get(reverse("team", args=[team.pk])).content.decode()


def test_a_second_invitation_to_the_same_address_is_refused_until_the_first_ends(alice, team):
    actions.do_invite(team, "x@example.com", Role.VIEWER, alice)
    with pytest.raises(actions.ValidationError):
        actions.do_invite(team, "X@example.com", Role.EDITOR, alice)
    with pytest.raises(actions.ValidationError):
        actions.do_invite(team, "bob@example.com", Role.EDITOR, alice)  # already a member
    with pytest.raises(actions.ValidationError):
        actions.do_invite(team, "not an address", Role.EDITOR, alice)


def test_questions_search_a_team_only_once_its_invitation_is_accepted(alice, charlie, team):
    """With no collection named, search covers the user's own collections and those of the
    teams they joined: an invitation alone adds nothing to charlie's answers."""
    from ingestion.index import create_version
    from ingestion.versions import flip
    from providers import registry

    shared = make_collection(alice, "Team handbook", team=team)
    own = make_collection(charlie, "Charlie's notes")
    for collection in (shared, own):
        flip(collection, create_version(collection, registry.text_embedder(), status="building"))

    def searched() -> set[int]:
        return {version.collection_id for version in scope_for(charlie).versions}

    invitation = actions.do_invite(team, "charlie@example.com", Role.VIEWER, alice)
    assert searched() == {own.pk}
    actions.do_accept_invitation(invitation, charlie)
    assert searched() == {own.pk, shared.pk}


def test_each_invitation_step_leaves_one_audit_entry(alice, charlie, team):
    before = Entry.objects.count()
    invitation = actions.do_invite(team, "charlie@example.com", Role.VIEWER, alice)
    actions.do_resend_invitation(invitation)
    actions.do_accept_invitation(invitation, charlie)
    entries = list(Entry.objects.order_by("pk").values_list("action", "team_id", "actor_id")[before:])
    assert entries == [
        (Action.INVITATION_CREATE, team.pk, alice.pk),
        (Action.INVITATION_RESEND, team.pk, None),
        (Action.INVITATION_ACCEPT, team.pk, charlie.pk),
    ]


def test_the_invitee_cannot_manage_the_teams_invitations(api, client, alice, charlie, team):
    """Being invited opens nothing of the team: its invitation routes are 404 for charlie,
    by token and by session, his own invitation included."""
    invitation = actions.do_invite(team, "charlie@example.com", Role.ADMIN, alice)
    token_for(api, charlie)
    base = f"/api/teams/{team.pk}/invitations/"
    assert api.get(base).status_code == 404
    assert api.post(f"{base}{invitation.pk}/resend/").status_code == 404
    assert api.delete(f"{base}{invitation.pk}/").status_code == 404
    assert api.get(f"/api/teams/{team.pk}/").status_code == 404
    client.force_login(charlie)
    assert client.post(reverse("revoke-invitation", args=[team.pk, invitation.pk])).status_code == 404
    assert client.get(reverse("team", args=[team.pk])).status_code == 404
    assert Invitation.objects.get(pk=invitation.pk).status == "pending"


def test_where_addresses_are_verified_an_invitation_waits_for_the_proof(api, alice, charlie, team, settings):
    """With verification on, claiming an address (at sign-up, or by changing one's email)
    does not open its invitations: only a verified address does."""
    from allauth.account.models import EmailAddress

    settings.ACCOUNT_EMAIL_VERIFICATION = "optional"
    invitation = actions.do_invite(team, "charlie@example.com", Role.EDITOR, alice)
    token_for(api, charlie)
    assert api.get("/api/invitations/").json()["results"] == []
    assert api.post(f"/api/invitations/{invitation.pk}/accept/").status_code == 404
    EmailAddress.objects.create(user=charlie, email="charlie@example.com", verified=True, primary=True)
    assert [i["id"] for i in api.get("/api/invitations/").json()["results"]] == [invitation.pk]
    assert api.post(f"/api/invitations/{invitation.pk}/accept/").status_code == 200

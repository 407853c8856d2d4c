from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404

from knowledge import actions
from knowledge.access import access_collection, access_team
from knowledge.models import Collection, Role
from tests.conftest import make_collection, set_role


def test_it_shows_own_and_team_collections_only(alice, bob, charlie, private_collection, team_collection):
    assert set(Collection.objects.visible_to(alice)) == {private_collection, team_collection}
    assert set(Collection.objects.visible_to(bob)) == {team_collection}
    assert list(Collection.objects.visible_to(charlie)) == []
    assert list(Collection.objects.visible_to(AnonymousUser())) == []


def test_it_answers_404_for_what_the_user_cannot_see(charlie, bob, private_collection, team_collection):
    with pytest.raises(Http404):
        access_collection(charlie, private_collection.pk)
    with pytest.raises(Http404):
        access_collection(charlie, team_collection.pk)
    with pytest.raises(Http404):
        access_collection(bob, private_collection.pk)
    with pytest.raises(Http404):
        access_collection(charlie, "not-a-number")


def test_it_answers_403_for_a_visible_collection_the_viewer_cannot_change(bob, team, team_collection):
    assert access_collection(bob, team_collection.pk) == team_collection
    with pytest.raises(PermissionDenied):
        access_collection(bob, team_collection.pk, write=True)
    set_role(team, bob, Role.EDITOR)
    assert access_collection(bob, team_collection.pk, write=True) == team_collection
    with pytest.raises(PermissionDenied):
        access_collection(bob, team_collection.pk, manage=True)
    set_role(team, bob, Role.ADMIN)
    assert access_collection(bob, team_collection.pk, manage=True) == team_collection


def test_it_loses_access_when_removed_from_the_team(alice, bob, team, team_collection):
    actions.do_remove_member(team.memberships.get(user=bob))
    with pytest.raises(Http404):
        access_collection(bob, team_collection.pk)


def test_it_keeps_one_admin_per_team(alice, team):
    membership = team.memberships.get(user=alice)
    with pytest.raises(ValidationError, match="at least one admin"):
        actions.do_change_role(membership, Role.VIEWER)
    with pytest.raises(ValidationError, match="at least one admin"):
        actions.do_remove_member(membership)


def test_it_lets_only_team_editors_create_team_collections(bob, charlie, team):
    with pytest.raises(PermissionDenied):
        make_collection(bob, "Bob's", team=team)
    with pytest.raises(PermissionDenied):
        make_collection(charlie, "Charlie's", team=team)
    set_role(team, bob, Role.EDITOR)
    assert make_collection(bob, "Bob's", team=team).owner_team == team


def test_it_refuses_duplicate_names_per_owner(alice, bob):
    make_collection(alice, "Specs")
    with pytest.raises(ValidationError, match="already exists"):
        make_collection(alice, "Specs")
    assert make_collection(bob, "Specs").owner_user == bob  # another owner may reuse it


def test_it_hides_teams_from_non_members(bob, charlie, team):
    assert access_team(bob, team.pk) == team
    with pytest.raises(Http404):
        access_team(charlie, team.pk)
    with pytest.raises(PermissionDenied):
        access_team(bob, team.pk, manage=True)

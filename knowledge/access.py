"""One permission-checked fetch per object (healthchecks `_get_check_for_user()`).

What the user may not see is a 404, so nobody learns that it exists; what they may see
but not change is a 403.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.utils.translation import gettext as _

from knowledge.models import ApiToken, Collection, Document, Invitation, Membership, Page, Role, Team

if TYPE_CHECKING:
    from portal.typing import AnyUser


def access_collection(
    user: AnyUser, collection_id: int | str, *, write: bool = False, manage: bool = False
) -> Collection:
    """The collection, if `user` may see it; `write` needs editor, `manage` needs team admin
    (or the owning user)."""
    collection = get_or_404(Collection.objects.visible_to(user).select_related("owner_team"), collection_id)
    if manage and not Collection.objects.manageable_by(user).filter(pk=collection.pk).exists():
        raise PermissionDenied(_("Only the owner or a team admin can do this to the collection."))
    if write and not Collection.objects.editable_by(user).filter(pk=collection.pk).exists():
        raise PermissionDenied(_("You can read this collection but not change it."))
    return collection


def access_document(user: AnyUser, document_id: int | str, *, write: bool = False) -> Document:
    """The document, if `user` may see its collection; `write` (delete, re-run) needs editor."""
    visible = Collection.objects.visible_to(user).values("pk")
    document: Document = get_or_404(
        Document.objects.filter(collection__in=visible).select_related("collection"), document_id
    )
    if write:
        access_collection(user, document.collection_id, write=True)
    return document


def access_page(user: AnyUser, page_id: int | str) -> Page:
    visible = Collection.objects.visible_to(user).values("pk")
    page: Page = get_or_404(Page.objects.filter(document__collection__in=visible).select_related("document"), page_id)
    return page


def access_team(user: AnyUser, team_id: int | str, *, manage: bool = False) -> Team:
    """The team, if `user` is a member; `manage` needs the admin role."""
    team = get_or_404(Team.objects.visible_to(user), team_id)
    if manage and role_in_team(user, team) != Role.ADMIN:
        raise PermissionDenied(_("Only team admins can change the team."))
    return team


def access_membership(user: AnyUser, team_id: int | str, membership_id: int | str) -> Membership:
    """A membership of a team that `user` administers, to change or remove it."""
    team = access_team(user, team_id, manage=True)
    visible = Team.objects.visible_to(user).values("pk")
    memberships = Membership.objects.filter(team=team, team__in=visible).select_related("user", "team")
    membership: Membership = get_or_404(memberships, membership_id)
    return membership


def access_team_invitation(user: AnyUser, team_id: int | str, invitation_id: int | str) -> Invitation:
    """An invitation of a team that `user` administers, to send again or revoke."""
    team = access_team(user, team_id, manage=True)
    invitation: Invitation = get_or_404(Invitation.objects.filter(team=team).select_related("team"), invitation_id)
    return invitation


def access_my_invitation(user: AnyUser, invitation_id: int | str) -> Invitation:
    """An invitation addressed to `user`'s email address, to accept or decline; anyone
    else's does not exist."""
    invitation: Invitation = get_or_404(Invitation.objects.for_user(user).select_related("team"), invitation_id)
    return invitation


def access_token(user: AnyUser, token_id: int | str) -> ApiToken:
    """One of `user`'s own API tokens (revoked ones too); anyone else's does not exist."""
    token: ApiToken = get_or_404(ApiToken.objects.filter(user=user.pk), token_id)
    return token


def role_in_team(user: AnyUser, team: Team) -> Role | None:
    if not user.is_authenticated:
        return None
    role = Membership.objects.filter(team=team, user=user).values_list("role", flat=True).first()
    return Role(role) if role else None


def collection_role(user: AnyUser, collection: Collection) -> Role | None:
    """The user's role on a collection they can see: admin for the owning user."""
    if collection.owner_user_id is not None:
        return Role.ADMIN if collection.owner_user_id == user.pk else None
    assert collection.owner_team is not None
    return role_in_team(user, collection.owner_team)


def get_or_404(queryset, pk: int | str):  # type: ignore[no-untyped-def]
    """The row of `queryset` (already filtered by the user) with this id, or a 404."""
    try:
        return queryset.get(pk=int(pk))
    except (ValueError, TypeError, queryset.model.DoesNotExist):
        raise Http404(_("Not found.")) from None

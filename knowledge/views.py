"""Pages: thin views that parse a form, call an action and render or redirect."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import Count, Q
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from knowledge import actions, hooks
from knowledge.access import (
    access_collection,
    access_membership,
    access_my_invitation,
    access_team,
    access_team_invitation,
    access_token,
    collection_role,
    role_in_team,
)
from knowledge.feedback import report
from knowledge.forms import (
    AddMemberForm,
    CollectionForm,
    CollectionSettingsForm,
    RenameCollectionForm,
    RoleForm,
    TeamForm,
    TokenForm,
)
from knowledge.models import ApiToken, Collection, Document, IndexVersion, Invitation, Membership, Role, Team
from portal.typing import AuthedRequest


@login_required
def dashboard(request: AuthedRequest) -> HttpResponse:
    return _dashboard(request, CollectionForm(user=request.user))


def _dashboard(request: AuthedRequest, form: CollectionForm, status: int = 200) -> HttpResponse:
    collections = (
        Collection.objects.visible_to(request.user)
        .select_related("owner_team", "owner_user")
        .annotate(
            document_count=Count("documents"),
            ready_count=Count("documents", filter=Q(documents__status=Document.Status.READY)),
            working_count=Count(
                "documents", filter=Q(documents__status__in=[Document.Status.PENDING, Document.Status.PROCESSING])
            ),
            failed_count=Count("documents", filter=Q(documents__status=Document.Status.FAILED)),
        )
    )
    teams = Membership.objects.filter(user=request.user).select_related("team").order_by("team__name")
    context = {"collections": collections, "memberships": teams, "form": form}
    return render(request, "knowledge/dashboard.html", context, status=status)


@login_required
@require_POST
def collection_create(request: AuthedRequest) -> HttpResponse:
    form = CollectionForm(request.POST, user=request.user)
    if form.is_valid():
        try:
            collection = actions.do_create_collection(
                request.user,
                form.cleaned_data["name"],
                team=form.cleaned_data["team"],
                description=form.cleaned_data["description"],
            )
        except ValidationError as exc:
            form.add_error("name", exc)
        else:
            messages.success(request, _("Collection “%(name)s” created.") % {"name": collection.name})
            return redirect("collection", collection.pk)
    return _dashboard(request, form, status=400)


@login_required
@require_GET
def collection_detail(request: AuthedRequest, collection_id: int) -> HttpResponse:
    collection = access_collection(request.user, collection_id)
    role = collection_role(request.user, collection)
    documents = list(collection.documents.order_by("rel_path"))
    for document in documents:
        document.type_label = type_label(document.mime)  # type: ignore[attr-defined]
    context = {
        **_tab_context(collection, role),
        "documents": documents,
        "max_upload_mb": settings.MAX_UPLOAD_MB,
        "js_strings": _collection_strings(),
    }
    return render(request, "knowledge/collection.html", context)


@login_required
def collection_settings(request: AuthedRequest, collection_id: int) -> HttpResponse:
    """The settings tab: index versions and renaming for editors; chunking, weights and the
    evaluation gate (saved here by POST) and deletion for the owner or a team admin."""
    if request.method != "POST":
        collection = access_collection(request.user, collection_id, write=True)
        return _settings_page(request, collection, _rename_form(collection))
    # Changed chunking makes beat build a new index version (ingestion.versions.reindex_outdated).
    collection = access_collection(request.user, collection_id, manage=True)
    form = CollectionSettingsForm(request.POST)
    if form.is_valid():
        actions.do_change_collection_settings(collection, form.settings(collection.settings or {}))
        messages.success(request, _("Settings saved. Changed chunking is applied by a new index version."))
        return redirect("collection-settings", collection.pk)
    return _settings_page(request, collection, _rename_form(collection), settings_form=form, status=400)


@login_required
@require_POST
def collection_rename(request: AuthedRequest, collection_id: int) -> HttpResponse:
    collection = access_collection(request.user, collection_id, write=True)
    form = RenameCollectionForm(request.POST)
    if form.is_valid():
        try:
            actions.do_rename_collection(collection, form.cleaned_data["name"], form.cleaned_data["description"])
        except ValidationError as exc:
            form.add_error("name", exc)
        else:
            messages.success(request, _("Collection renamed."))
            return redirect("collection-settings", collection.pk)
    collection.refresh_from_db()
    return _settings_page(request, collection, form, status=400)


def _rename_form(collection: Collection) -> RenameCollectionForm:
    return RenameCollectionForm(initial={"name": collection.name, "description": collection.description})


def _tab_context(collection: Collection, role: Role | None) -> dict[str, object]:
    """What every tab of a collection's page shows in its header and tab bar."""
    return {
        "collection": collection,
        "role": role,
        "can_write": role is not None and role.at_least(Role.EDITOR),
        "can_manage": role == Role.ADMIN,
    }


def _settings_page(
    request: AuthedRequest,
    collection: Collection,
    form: RenameCollectionForm,
    settings_form: CollectionSettingsForm | None = None,
    status: int = 200,
) -> HttpResponse:
    role = collection_role(request.user, collection)
    context = _tab_context(collection, role)
    context |= {
        "form": form,
        "versions": _versions(collection),
        "settings_form": (settings_form or CollectionSettingsForm.for_collection(collection.settings or {}))
        if context["can_manage"]
        else None,
        "js_strings": _collection_strings(),
    }
    return render(request, "knowledge/collection_settings.html", context, status=status)


TYPE_LABELS = {
    "application/pdf": "PDF",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "Word",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "PowerPoint",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "Excel",
    "text/markdown": "Markdown",
    "text/plain": "Text",
    "text/csv": "CSV",
}


def type_label(mime: str) -> str:
    """A short name for a sniffed type: "PDF", "Word", "PNG", "MP4"."""
    if mime in TYPE_LABELS:
        return TYPE_LABELS[mime]
    subtype = mime.rpartition("/")[2].removeprefix("x-").split("+")[0].split(";")[0]
    return subtype.upper() if len(subtype) <= 5 else subtype


def _collection_strings() -> dict[str, str]:
    """What collection.js says, translated here (%(name)s placeholders filled in the browser)."""
    return {
        "uploading": _("Uploading %(percent)s%%"),
        "waiting": _("Uploaded; waiting to be indexed"),
        "parsing": _("Parsing pages %(done)s/%(total)s"),
        "parsing_count": _("Parsing page %(done)s"),
        "pace": _("%(rate)s pages/s, about %(left)s left"),
        "seconds": _("%(count)s s"),
        "minutes": _("%(count)s min"),
        "done_one": _("Done: 1 page"),
        "done": _("Done: %(pages)s pages"),
        "unchanged": _("Unchanged: already indexed"),
        "failed": _("Failed: %(error)s"),
        "upload_failed": _("The upload failed (%(status)s)."),
        "network": _("The upload was interrupted. Check the connection and try again."),
        "too_large": _("Larger than the %(limit)s MB upload limit."),
        "forbidden": _("You may not upload to this collection."),
        "confirm_reindex": _("Build a new index version? The active one keeps answering until it is complete."),
        "confirm_rollback": _("Go back to the previous index version?"),
        "confirm_activate": _("Make version %(number)s the active one?"),
        "version_started": _("Building version %(number)s."),
        "version_active": _("Version %(number)s is now active."),
        "action_failed": _("That did not work: %(detail)s"),
    }


@dataclass(frozen=True)
class VersionRow:
    version: IndexVersion
    active: bool
    done: int  # documents finished building (a building version only)
    total: int

    @property
    def percent(self) -> int:
        return round(100 * self.done / self.total) if self.total else 100


def _versions(collection: Collection) -> list[VersionRow]:
    """The kept index versions, newest first; a building one with how many of its runs ended."""
    versions = list(collection.index_versions.order_by("-number"))
    counts = hooks.build_progress([v.pk for v in versions if v.status == IndexVersion.Status.BUILDING])
    return [VersionRow(v, v.pk == collection.active_version_id, *counts.get(v.pk, (0, 0))) for v in versions]


@login_required
def collection_delete(request: AuthedRequest, collection_id: int) -> HttpResponse:
    collection = access_collection(request.user, collection_id, manage=True)
    if request.method == "POST":
        name = collection.name
        actions.do_delete_collection(collection)
        messages.success(request, _("Collection “%(name)s” deleted.") % {"name": name})
        return redirect("dashboard")
    return render(request, "knowledge/collection_delete.html", {"collection": collection})


@login_required
def team_list(request: AuthedRequest) -> HttpResponse:
    form = TeamForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            team = actions.do_create_team(request.user, form.cleaned_data["name"])
        except ValidationError as exc:
            form.add_error("name", exc)
        else:
            messages.success(request, _("Team “%(name)s” created.") % {"name": team.name})
            return redirect("team", team.pk)
    memberships = Membership.objects.filter(user=request.user).select_related("team").order_by("team__name")
    status = 400 if request.method == "POST" else 200
    return render(request, "knowledge/teams.html", {"memberships": memberships, "form": form}, status=status)


@login_required
def team_detail(request: AuthedRequest, team_id: int) -> HttpResponse:
    # Any member may look; adding a member (the POST) needs team admin.
    team = access_team(request.user, team_id, manage=request.method == "POST")
    is_admin = role_in_team(request.user, team) == Role.ADMIN
    form = AddMemberForm(request.POST or None)
    if request.method == "POST" and form.is_valid() and _add_member(request, team, form):
        return redirect("team", team.pk)
    return render(
        request,
        "knowledge/team.html",
        _team_context(team, is_admin, form),
        status=400 if request.method == "POST" else 200,
    )


def _add_member(request: AuthedRequest, team: Team, form: AddMemberForm) -> bool:
    """Invite the address: the same message whether or not it has an account."""
    try:
        invitation = actions.do_invite(team, form.cleaned_data["email"], Role(form.cleaned_data["role"]), request.user)
    except ValidationError as exc:
        form.add_error("email", exc)
        return False
    messages.success(
        request,
        _("Invitation sent to %(email)s. They become a member when they accept it.") % {"email": invitation.email},
    )
    return True


def _team_context(team: Team, is_admin: bool, form: AddMemberForm) -> dict[str, object]:
    members = team.memberships.select_related("user").order_by("user__email")
    collections = team.collections.order_by("name")
    invitations = (
        team.invitations.filter(status=Invitation.Status.PENDING).select_related("invited_by") if is_admin else []
    )
    return {
        "team": team,
        "members": members,
        "collections": collections,
        "invitations": invitations,
        "is_admin": is_admin,
        "form": form,
        "roles": Role.choices,
    }


@login_required
@require_POST
def invitation_resend(request: AuthedRequest, team_id: int, invitation_id: int) -> HttpResponse:
    invitation = access_team_invitation(request.user, team_id, invitation_id)
    report(request, lambda: actions.do_resend_invitation(invitation), _("Invitation sent again."))
    return redirect("team", invitation.team_id)


@login_required
@require_POST
def invitation_revoke(request: AuthedRequest, team_id: int, invitation_id: int) -> HttpResponse:
    invitation = access_team_invitation(request.user, team_id, invitation_id)
    report(request, lambda: actions.do_revoke_invitation(invitation), _("Invitation revoked."))
    return redirect("team", invitation.team_id)


@login_required
def invitation_list(request: AuthedRequest) -> HttpResponse:
    """The invitations addressed to the user, to accept or decline."""
    invitations = Invitation.objects.for_user(request.user).pending().select_related("team", "invited_by")
    return render(request, "knowledge/invitations.html", {"invitations": invitations})


@login_required
@require_POST
def invitation_accept(request: AuthedRequest, invitation_id: int) -> HttpResponse:
    invitation = access_my_invitation(request.user, invitation_id)
    try:
        actions.do_accept_invitation(invitation, request.user)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect("invitations")
    messages.success(request, _("You joined the team “%(team)s”.") % {"team": invitation.team.name})
    return redirect("team", invitation.team_id)


@login_required
@require_POST
def invitation_decline(request: AuthedRequest, invitation_id: int) -> HttpResponse:
    invitation = access_my_invitation(request.user, invitation_id)
    report(request, lambda: actions.do_decline_invitation(invitation), _("Invitation declined."))
    return redirect("invitations")


@login_required
@require_POST
def member_role(request: AuthedRequest, team_id: int, membership_id: int) -> HttpResponse:
    membership = access_membership(request.user, team_id, membership_id)
    form = RoleForm(request.POST)
    if form.is_valid():
        report(request, lambda: actions.do_change_role(membership, Role(form.cleaned_data["role"])), _("Role changed."))
    return redirect("team", membership.team_id)


@login_required
@require_POST
def member_remove(request: AuthedRequest, team_id: int, membership_id: int) -> HttpResponse:
    membership = access_membership(request.user, team_id, membership_id)
    report(request, lambda: actions.do_remove_member(membership), _("Member removed."))
    return redirect("team", membership.team_id)


@login_required
def token_list(request: AuthedRequest) -> HttpResponse:
    form = TokenForm(request.POST or None, user=request.user)
    new_key = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            _token, new_key = actions.do_create_token(
                request.user, data["name"], read_only=data["read_only"], collections=list(data["collections"]) or None
            )
        except ValidationError as exc:
            form.add_error(None if hasattr(exc, "error_dict") else "name", exc)
        else:
            form = TokenForm(user=request.user)
    tokens = ApiToken.objects.filter(user=request.user).prefetch_related("collections")
    status = 400 if form.errors else 200  # a refused name, like the other pages' forms
    context = {"tokens": tokens, "form": form, "new_key": new_key}
    return render(request, "knowledge/tokens.html", context, status=status)


@login_required
@require_POST
def token_revoke(request: AuthedRequest, token_id: int) -> HttpResponse:
    token = access_token(request.user, token_id)
    actions.do_revoke_token(token)
    messages.success(request, _("Token “%(name)s” revoked.") % {"name": token.name})
    return redirect("tokens")

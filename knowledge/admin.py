"""Admin. Superusers see everything; other staff see only what the portal lets them see,
and an object outside that is a 404 there too (no existence leak through the admin)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import Http404, HttpRequest
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from audit.log import record
from audit.models import Action
from knowledge import actions
from knowledge.models import ApiToken, Collection, Document, IndexVersion, Invitation, Membership, Role, Team


class VisibleOnlyAdmin(admin.ModelAdmin):
    def restrict(self, queryset: QuerySet[Any], request: HttpRequest) -> QuerySet[Any]:
        raise NotImplementedError

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return self.restrict(queryset, request)

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        obj = super().get_object(request, object_id, from_field)
        if obj is None:
            raise Http404(_("Not found."))
        return obj


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


class TeamForm(forms.ModelForm):
    def clean_name(self) -> str:
        # The action's rule (no bidirectional controls, unique in any case), shown on the field.
        name: str = self.cleaned_data["name"]
        return actions.check_team_name(name, self.instance if self.instance.pk else None)


@admin.register(Team)
class TeamAdmin(VisibleOnlyAdmin):
    """A rename and a delete go through the actions (entries; a delete removes each collection
    as do_delete_collection does, with its files)."""

    list_display = ["name", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]
    form = TeamForm

    def restrict(self, queryset: QuerySet[Any], request: HttpRequest) -> QuerySet[Any]:
        return queryset.filter(pk__in=Team.objects.visible_to(request.user).values("pk"))

    def save_model(self, request: HttpRequest, obj: Team, form: Any, change: bool) -> None:
        if not change:  # an operator's team, without members: do_create_team makes its creator admin
            super().save_model(request, obj, form, change)
            record(Action.TEAM_CREATE, obj, team_id=obj.pk)
            return
        stored = Team.objects.get(pk=obj.pk)
        actions.do_update_team(stored, name=obj.name, description=obj.description)

    def delete_model(self, request: HttpRequest, obj: Team) -> None:
        actions.do_delete_team(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Team]) -> None:
        for team in queryset:
            actions.do_delete_team(team)

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        roles = dict(Membership.objects.filter(team=form.instance).values_list("pk", "role"))
        super().save_formset(request, form, formset, change)
        if formset.model is not Membership:
            return
        for membership in formset.new_objects:
            actions.record_membership(membership, before=None, after=membership.role)
        for membership, _fields in formset.changed_objects:
            if roles.get(membership.pk) != membership.role:
                actions.record_membership(membership, before=roles.get(membership.pk), after=membership.role)
        for membership in formset.deleted_objects:
            actions.record_membership(membership, before=roles.get(membership.pk), after=None)


@admin.register(Membership)
class MembershipAdmin(VisibleOnlyAdmin):
    list_display = ["team", "user", "role", "created_at"]
    list_filter = ["role"]
    search_fields = ["team__name", "user__email"]
    autocomplete_fields = ["team", "user"]

    def restrict(self, queryset: QuerySet[Any], request: HttpRequest) -> QuerySet[Any]:
        return queryset.filter(team__in=Team.objects.visible_to(request.user).values("pk"))

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        before = Membership.objects.filter(pk=obj.pk).values_list("role", flat=True).first() if change else None
        super().save_model(request, obj, form, change)
        if not change or before != obj.role:
            actions.record_membership(obj, before=before, after=obj.role)

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        actions.record_membership(obj, before=obj.role, after=None)
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Membership]) -> None:
        for membership in queryset:
            actions.record_membership(membership, before=membership.role, after=None)
        super().delete_queryset(request, queryset)


@admin.register(Invitation)
class InvitationAdmin(VisibleOnlyAdmin):
    """Invitations are made by team admins on the team page; here they are read and revoked."""

    list_display = ["email", "team", "role", "status", "invited_by", "created_at", "expires_at"]
    list_filter = ["status", "role"]
    search_fields = ["email", "team__name", "invited_by__email"]
    readonly_fields = [
        "team",
        "email",
        "role",
        "invited_by",
        "status",
        "created_at",
        "sent_at",
        "expires_at",
        "answered_at",
    ]
    actions = ["revoke"]

    def restrict(self, queryset: QuerySet[Any], request: HttpRequest) -> QuerySet[Any]:
        return queryset.filter(team__in=Team.objects.with_role_at_least(request.user, Role.ADMIN).values("pk"))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description=_("Revoke selected invitations"))
    def revoke(self, request: HttpRequest, queryset: QuerySet[Invitation]) -> None:
        revoked = 0
        for invitation in queryset.filter(status=Invitation.Status.PENDING):
            actions.do_revoke_invitation(invitation)
            revoked += 1
        self.message_user(request, ngettext("%d invitation revoked.", "%d invitations revoked.", revoked) % revoked)


@admin.register(Collection)
class CollectionAdmin(VisibleOnlyAdmin):
    """Reindex and roll back: ingestion/admin.py; the test search: assistant/admin.py."""

    list_display = ["name", "owner_user", "owner_team", "created_at", "updated_at"]
    search_fields = ["name", "owner_user__email", "owner_team__name"]
    list_select_related = ["owner_user", "owner_team"]
    autocomplete_fields = ["owner_user", "owner_team", "created_by"]
    # Versions change only by a finished build, a flip or a rollback (ingestion.versions).
    readonly_fields = ["active_version"]

    def restrict(self, queryset: QuerySet[Any], request: HttpRequest) -> QuerySet[Any]:
        return queryset.filter(pk__in=Collection.objects.visible_to(request.user).values("pk"))

    def save_model(self, request: HttpRequest, obj: Collection, form: Any, change: bool) -> None:
        fields = ("name", "description", "settings")
        stored = Collection.objects.filter(pk=obj.pk).values_list(*fields).first()
        before = dict(zip(fields, stored, strict=True)) if stored else {}
        super().save_model(request, obj, form, change)
        if not change:
            record(Action.COLLECTION_CREATE, obj, **obj.audit_scope())
            return
        changes = {key: (value, getattr(obj, key)) for key, value in before.items() if value != getattr(obj, key)}
        if "settings" in changes:
            record(Action.COLLECTION_SETTINGS, obj, changes={"settings": changes.pop("settings")}, **obj.audit_scope())
        if changes:
            record(Action.COLLECTION_RENAME, obj, changes=changes, **obj.audit_scope())

    def delete_model(self, request: HttpRequest, obj: Collection) -> None:
        actions.do_delete_collection(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Collection]) -> None:
        for collection in queryset:
            actions.do_delete_collection(collection)


@admin.register(ApiToken)
class ApiTokenAdmin(VisibleOnlyAdmin):
    """Tokens are created by their owners (the key is shown to them once); admins revoke."""

    list_display = ["name", "user", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "user__email", "prefix"]
    readonly_fields = ["user", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def restrict(self, queryset: QuerySet[Any], request: HttpRequest) -> QuerySet[Any]:
        return queryset.filter(user=request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description=_("Revoke selected tokens"))
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset:
            actions.do_revoke_token(token)


class InCollectionAdmin(VisibleOnlyAdmin):
    """Rows that belong to a collection: visible when the collection is."""

    def restrict(self, queryset: QuerySet[Any], request: HttpRequest) -> QuerySet[Any]:
        return queryset.filter(collection__in=Collection.objects.visible_to(request.user).values("pk"))


@admin.register(Document)
class DocumentAdmin(InCollectionAdmin):
    """Ingest again: ingestion/admin.py."""

    list_display = ["name", "collection", "mime", "status", "page_count", "size", "updated_at"]
    list_filter = ["status", "mime"]
    search_fields = ["name", "rel_path", "sha256"]
    list_select_related = ["collection"]
    readonly_fields = ["collection", "rel_path", "file", "sha256", "size", "mime", "status", "error", "page_count"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # documents arrive by upload or folder sync, which parse and index them

    def delete_model(self, request: HttpRequest, obj: Document) -> None:
        actions.do_delete_document(obj)  # its files too, and the audit entry

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        for document in queryset.select_related("collection"):
            actions.do_delete_document(document)


@admin.register(IndexVersion)
class IndexVersionAdmin(InCollectionAdmin):
    """Make active (flip): ingestion/admin.py."""

    list_display = ["collection", "number", "status", "embedder_id", "dims", "created_at", "activated_at"]
    list_filter = ["status"]
    readonly_fields = [
        "collection",
        "number",
        "embedder_id",
        "dims",
        "config",
        "config_hash",
        "status",
        "built_at",
        "activated_at",
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

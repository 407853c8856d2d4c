"""Admin. Superusers see everything; other staff see only what the portal lets them see,
and an object outside that is a 404 there too (no existence leak through the admin)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import Http404, HttpRequest
from django.utils.translation import gettext_lazy as _

from knowledge import actions
from knowledge.models import ApiToken, Collection, Document, IndexVersion, Membership, Team


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


@admin.register(Team)
class TeamAdmin(VisibleOnlyAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]

    def restrict(self, queryset: QuerySet[Any], request: HttpRequest) -> QuerySet[Any]:
        return queryset.filter(pk__in=Team.objects.visible_to(request.user).values("pk"))


@admin.register(Membership)
class MembershipAdmin(VisibleOnlyAdmin):
    list_display = ["team", "user", "role", "created_at"]
    list_filter = ["role"]
    search_fields = ["team__name", "user__email"]
    autocomplete_fields = ["team", "user"]

    def restrict(self, queryset: QuerySet[Any], request: HttpRequest) -> QuerySet[Any]:
        return queryset.filter(team__in=Team.objects.visible_to(request.user).values("pk"))


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

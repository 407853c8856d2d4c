"""The audit log in the Django admin: every entry, for superusers only, and read-only for
them too (an entry is evidence: nobody adds, changes or deletes one by hand; beat prunes
old ones, audit/tasks.py). Team admins read their teams' entries on the audit page."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from audit.models import Entry

FIELDS = (
    "at",
    "actor",
    "actor_label",
    "action",
    "object_type",
    "object_id",
    "object_label",
    "team_id",
    "collection_id",
    "owner_id",
    "changes",
    "ip",
)


@admin.register(Entry)
class EntryAdmin(admin.ModelAdmin):
    list_display = ["at", "actor_label", "action", "object_type", "object_label", "team_id", "collection_id", "ip"]
    list_filter = ["action", "at"]
    search_fields = ["actor_label", "object_label", "ip"]
    date_hierarchy = "at"
    list_select_related = False
    show_full_result_count = False
    fields = FIELDS
    readonly_fields = FIELDS

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

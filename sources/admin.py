"""Admin: sources (saved, synced and removed through sources.actions, credentials
write-only) and their sync runs (read only). Superusers see every source; other staff only
those of the collections they manage, as on the pages: a source holds an address and
credentials. Anything else is a 404 there too (knowledge.admin.VisibleOnlyAdmin)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms import ModelChoiceField
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from common.run_admin import RUN_COLUMNS, RUN_FIELDS, RunColumns
from knowledge.admin import VisibleOnlyAdmin
from knowledge.models import Collection
from sources.actions import FIELDS, do_delete_source, do_save_source, do_start_sync
from sources.forms import SourceFormBase
from sources.models import Source, SyncRun


class SourceAdminForm(SourceFormBase):
    class Meta(SourceFormBase.Meta):
        fields = ["collection", *FIELDS]


@admin.register(Source)
class SourceAdmin(VisibleOnlyAdmin):
    form = SourceAdminForm
    list_display = ["name", "collection", "kind", "enabled", "last_sync_at", "next_sync_at"]
    list_filter = ["kind", "enabled"]
    search_fields = ["name", "collection__name"]
    list_select_related = ["collection"]
    readonly_fields = ["credentials", "created_by", "created_at", "last_sync_at", "next_sync_at", "runs"]
    fieldsets = [
        (None, {"fields": ["collection", *FIELDS]}),
        (_("Credentials"), {"fields": ["credentials", "username", "password", "clear_credentials"]}),
        (_("Syncs"), {"fields": ["runs", "last_sync_at", "next_sync_at", "created_by", "created_at"]}),
    ]
    actions = ["sync_now"]

    def restrict(self, queryset: QuerySet[Any], request: HttpRequest) -> QuerySet[Any]:
        return queryset.filter(collection__in=Collection.objects.manageable_by(request.user).values("pk"))

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> ModelChoiceField | None:
        if db_field.name == "collection" and not request.user.is_superuser:
            kwargs["queryset"] = Collection.objects.manageable_by(request.user).order_by("name")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    @admin.display(description=_("Stored credentials"))
    def credentials(self, obj: Source) -> str:
        if obj.has_credentials:
            return str(_("stored"))
        if obj.credentials_cleared:
            return str(_("removed: the address changed"))
        return str(_("none"))

    @admin.display(description=_("Sync runs"))
    def runs(self, obj: Source) -> str:
        if obj.pk is None:
            return "—"
        url = reverse("admin:sources_syncrun_changelist") + f"?source__id__exact={obj.pk}"
        return format_html('<a href="{}">{}</a>', url, _("This source's sync runs"))

    def save_model(self, request: HttpRequest, obj: Source, form: Any, change: bool) -> None:
        do_save_source(
            obj,
            credentials=form.credentials(),
            actor=request.user,
            clear_credentials=form.cleaned_data.get("clear_credentials", False),
        )

    def delete_model(self, request: HttpRequest, obj: Source) -> None:
        do_delete_source(obj)  # its documents too, and the audit entry

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Source]) -> None:
        for source in queryset.select_related("collection"):
            do_delete_source(source)

    @admin.action(description=_("Sync now"))
    def sync_now(self, request: HttpRequest, queryset: QuerySet[Source]) -> None:
        started = 0
        for source in queryset.select_related("collection"):
            do_start_sync(source, trigger=SyncRun.Trigger.MANUAL, actor=request.user)
            started += 1
        self.message_user(
            request,
            ngettext("%(count)d source queued to sync.", "%(count)d sources queued to sync.", started)
            % {"count": started},
            level=messages.SUCCESS,
        )


@admin.register(SyncRun)
class SyncRunAdmin(RunColumns, VisibleOnlyAdmin):
    """What each sync did; runs are made by Sync now and the schedule, never here."""

    list_display = [*RUN_COLUMNS, "source", "trigger"]
    list_filter = ["status", "trigger"]
    list_select_related = ["source", "source__collection", "requested_by"]
    search_fields = ["source__name"]
    readonly_fields = ["source", "trigger", *RUN_FIELDS, "counts", "failures"]

    def restrict(self, queryset: QuerySet[Any], request: HttpRequest) -> QuerySet[Any]:
        return queryset.filter(source__collection__in=Collection.objects.manageable_by(request.user).values("pk"))

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        # The link from a source's page; the queryset is already restricted.
        return lookup == "source__id__exact" or super().lookup_allowed(lookup, value, request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

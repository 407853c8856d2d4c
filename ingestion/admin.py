from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext as _

from ingestion.models import IngestionRun
from knowledge import actions
from knowledge.admin import InCollectionAdmin


@admin.register(IngestionRun)
class IngestionRunAdmin(InCollectionAdmin):
    list_display = ["__str__", "collection", "kind", "status", "progress", "total", "created_at", "finished_at"]
    list_filter = ["status", "kind"]
    list_select_related = ["collection", "document"]
    readonly_fields = [
        "collection",
        "document",
        "index_version",
        "kind",
        "status",
        "progress",
        "total",
        "counts",
        "error",
        "traceback",
        "started_at",
        "finished_at",
    ]

    actions = ["cancel", "retry"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description=_("Cancel (stops between pages)"))
    def cancel(self, request: HttpRequest, queryset: QuerySet[IngestionRun]) -> None:
        stopped = sum(actions.do_cancel_run(run) for run in queryset)
        self.message_user(request, _("%(count)d run(s) asked to stop.") % {"count": stopped}, level=messages.SUCCESS)

    @admin.action(description=_("Retry the document"))
    def retry(self, request: HttpRequest, queryset: QuerySet[IngestionRun]) -> None:
        for run in queryset.exclude(document=None).select_related("document"):
            assert run.document is not None
            actions.do_rerun_document(run.document)
        self.message_user(request, _("Ingestion queued."), level=messages.SUCCESS)

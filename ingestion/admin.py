from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from ingestion.models import IngestionRun
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

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

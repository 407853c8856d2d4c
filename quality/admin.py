"""Evaluation runs in the admin, read-only, in the columns every kind of run shows; they are
started from the collection's Evaluations tab, the API or a new index version's gate."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from common.run_admin import RUN_COLUMNS, RUN_FIELDS, RunColumns
from knowledge.admin import InCollectionAdmin
from quality.models import EvaluationRun


@admin.register(EvaluationRun)
class EvaluationRunAdmin(RunColumns, InCollectionAdmin):
    list_display = [*RUN_COLUMNS, "collection", "purpose", "decision"]
    list_filter = ["status", "purpose", "decision"]
    list_select_related = ["collection", "requested_by"]
    readonly_fields = [
        "collection",
        "version_number",
        "baseline_number",
        "purpose",
        "answers",
        *RUN_FIELDS,
        "stale",
        "summary",
        "drops",
        "decision",
        "seconds",
    ]
    exclude = ["version", "baseline", "per_question"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).defer("per_question")

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.db.models import CharField, F, QuerySet, Value
from django.db.models.functions import Cast, Coalesce, Concat
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from assistant.memory.service import forget_user
from common.runs import Run
from ingestion.models import IngestionRun
from portal.models import User
from quality.models import EvaluationRun
from sources.models import SyncRun


@admin.register(User)
class UserAdmin(DjangoUserAdmin):
    list_display = ["email", "username", "is_active", "is_staff", "is_superuser", "last_login"]
    search_fields = ["email", "username", "first_name", "last_name"]
    ordering = ["email"]
    readonly_fields = ["uid", "last_login", "date_joined"]
    fieldsets = (*DjangoUserAdmin.fieldsets, (_("Identity"), {"fields": ["uid"]}))  # type: ignore[misc]
    actions = ["purge_memories"]

    @admin.action(description=_("Purge memories"), permissions=["change"])
    def purge_memories(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        users = list(queryset)
        deleted = sum(forget_user(str(user.uid)) for user in users)
        self.message_user(
            request,
            gettext("Deleted %(memories)d memories of %(users)d user(s).") % {"memories": deleted, "users": len(users)},
            level=messages.SUCCESS,
        )


# The newest runs of every kind shown on the admin's "Background runs" page.
RUNS_SHOWN = 200
RUN_KINDS = {
    "ingestion": (_("Ingestion"), "admin:ingestion_ingestionrun_change"),
    "sync": (_("Source sync"), "admin:sources_syncrun_change"),
    "evaluation": (_("Evaluation"), "admin:quality_evaluationrun_change"),
}
_COLUMNS = (
    *("pk", "status", "progress", "total", "requested_by__email", "created_at", "started_at", "finished_at"),
    *("run_kind", "subject", "place"),  # annotated per kind
)


def all_runs(request: HttpRequest) -> HttpResponse:
    """Every kind of background run (common.runs), newest first, in one list with the same
    columns; each row links to its own admin page. Each kind's rows are those its own admin
    shows the user (VisibleOnlyAdmin.restrict: syncs of the collections they manage, the rest
    of those they see)."""

    def runs_of(model: type[Run]) -> QuerySet[Any]:
        return admin.site.get_model_admin(model).get_queryset(request)

    rows = (
        runs_of(IngestionRun)
        .annotate(
            run_kind=Value("ingestion"),
            subject=Coalesce("document__name", "collection__name"),
            place=F("collection__name"),
        )
        .values(*_COLUMNS)
        .union(
            runs_of(SyncRun)
            .annotate(run_kind=Value("sync"), subject=F("source__name"), place=F("source__collection__name"))
            .values(*_COLUMNS),
            runs_of(EvaluationRun)
            .annotate(
                run_kind=Value("evaluation"),
                subject=Concat(Value("v"), Cast("version_number", CharField())),
                place=F("collection__name"),
            )
            .values(*_COLUMNS),
            all=True,
        )
        .order_by("-created_at")[:RUNS_SHOWN]
    )
    statuses = dict(Run.Status.choices)
    shown = [
        {
            **row,
            "kind_label": RUN_KINDS[row["run_kind"]][0],
            "status_label": statuses.get(row["status"], row["status"]),
            "url": reverse(RUN_KINDS[row["run_kind"]][1], args=[row["pk"]]),
        }
        for row in rows
    ]
    context = {**admin.site.each_context(request), "title": _("Background runs"), "runs": shown, "limit": RUNS_SHOWN}
    return TemplateResponse(request, "admin/runs.html", context)


admin.site.index_template = "admin/portal_index.html"

"""Admin: ingestion runs (cancel, retry), and the actions that start ingestion on knowledge's
collections, documents and index versions (reindex, roll back, ingest again, flip). Those
admins are knowledge's (knowledge/admin.py), registered again here with the actions added:
knowledge may not import ingestion."""

from __future__ import annotations

from functools import partial

from django.contrib import admin, messages
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from common.run_admin import RUN_COLUMNS, RUN_FIELDS, RunColumns
from ingestion import actions
from ingestion.models import Finding, IngestionRun
from ingestion.stages import stage_label
from knowledge import admin as knowledge_admin
from knowledge.admin import InCollectionAdmin
from knowledge.feedback import report
from knowledge.models import Collection, Document, IndexVersion


@admin.register(IngestionRun)
class IngestionRunAdmin(RunColumns, InCollectionAdmin):
    list_display = [*RUN_COLUMNS, "collection", "kind", "sent_back"]
    list_filter = ["status", "kind", "findings__kind"]
    list_select_related = ["collection", "document", "requested_by"]
    readonly_fields = [
        "collection",
        "document",
        "index_version",
        "kind",
        "part_of",
        "first_page",
        "last_page",
        *RUN_FIELDS,
        "counts",
        "time_per_stage",
        "traceback",
        "reconciler_findings",
    ]

    actions = ["cancel", "retry"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[IngestionRun]:
        latest = Finding.objects.filter(run=OuterRef("pk")).order_by("-created_at", "-pk")
        return super().get_queryset(request).annotate(finding_reason=Subquery(latest.values("reason")[:1]))

    @admin.display(description=_("sent back by the reconciler"))
    def sent_back(self, run: IngestionRun) -> str:
        """Why the reconciler (ingestion/reconcile.py) last acted on this run, if it did."""
        return getattr(run, "finding_reason", None) or "—"

    @admin.display(description=_("reconciler findings"))
    def reconciler_findings(self, run: IngestionRun) -> SafeString | str:
        findings = run.findings.all()
        if not findings:
            return "—"
        return format_html_join(
            "",
            "<p>{} · {} · {} ({}): {}</p>",
            (
                (
                    f"{finding.created_at:%Y-%m-%d %H:%M}",
                    finding.get_kind_display(),
                    finding.get_outcome_display(),
                    finding.attempt,
                    finding.reason,
                )
                for finding in findings
            ),
        )

    @admin.display(description=_("time per stage"))
    def time_per_stage(self, run: IngestionRun) -> SafeString | str:
        """Where the run's time went, the largest stage first (ingestion.stages)."""
        seconds = (run.stages or {}).get("seconds") or {}
        if not seconds:
            return "—"
        calls = (run.stages or {}).get("counts") or {}
        total = sum(seconds.values()) or 1.0
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{} s</td><td>{} %</td><td>{}</td></tr>",
            (
                (stage_label(name), f"{value:.2f}", f"{100 * value / total:.0f}", calls.get(name, ""))
                for name, value in sorted(seconds.items(), key=lambda item: -item[1])
            ),
        )
        return format_html(
            "<table><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr>{}</table>",
            _("stage"),
            _("time"),
            _("share"),
            _("calls"),
            rows,
        )

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


@admin.register(Finding)
class FindingAdmin(InCollectionAdmin):
    """What the reconciler found stuck and did (ingestion/reconcile.py; `manage.py doctor`)."""

    list_display = ["created_at", "kind", "outcome", "attempt", "collection", "document", "run", "reason"]
    list_filter = ["kind", "outcome"]
    list_select_related = ["collection", "document", "run"]
    readonly_fields = [
        "created_at",
        "kind",
        "outcome",
        "attempt",
        "collection",
        "document",
        "run",
        "index_version",
        "reason",
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # made by the reconciler only

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


admin.site.unregister([Collection, Document, IndexVersion])


@admin.register(Collection)
class CollectionAdmin(knowledge_admin.CollectionAdmin):
    actions = ["reindex", "roll_back"]

    @admin.action(description=_("Reindex: build a new index version in the background"))
    def reindex(self, request: HttpRequest, queryset: QuerySet[Collection]) -> None:
        for collection in queryset:
            report(
                request,
                partial(actions.do_reindex, collection),
                _("Building a new index version of “%(name)s”.") % {"name": collection.name},
            )

    @admin.action(description=_("Roll back to the previous index version"))
    def roll_back(self, request: HttpRequest, queryset: QuerySet[Collection]) -> None:
        for collection in queryset:
            report(
                request,
                partial(actions.do_roll_back, collection),
                _("“%(name)s” is back on its previous index version.") % {"name": collection.name},
            )


@admin.register(Document)
class DocumentAdmin(knowledge_admin.DocumentAdmin):
    actions = ["rerun"]

    @admin.action(description=_("Ingest again (keeps pages that are still valid)"))
    def rerun(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        for document in queryset:
            actions.do_rerun_document(document)
        self.message_user(request, _("Ingestion queued."), level=messages.SUCCESS)


@admin.register(IndexVersion)
class IndexVersionAdmin(knowledge_admin.IndexVersionAdmin):
    actions = ["make_active"]

    @admin.action(description=_("Make this version active (flip)"))
    def make_active(self, request: HttpRequest, queryset: QuerySet[IndexVersion]) -> None:
        for version in queryset.exclude(status=IndexVersion.Status.BUILDING):
            report(
                request,
                partial(actions.do_activate_version, version),
                _("Version %(number)s is now active.") % {"number": version.number},
            )

"""A collection's sources pages, for the people who manage it (sources hold addresses and
credentials): the list with the form that adds one, a source's page (its settings, Sync now,
its runs with each skipped file and why, live over the collection's websocket), and the
confirmation that removes it with its documents."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_http_methods, require_POST

from knowledge.access import access_collection
from knowledge.models import Collection
from portal.typing import AuthedRequest
from sources.access import access_source
from sources.actions import do_delete_source, do_save_source, do_start_sync
from sources.forms import SourceForm, credentials_notice
from sources.models import Source, SyncRun

SHOWN_RUNS = 20
ACTIVE = (SyncRun.Status.QUEUED, SyncRun.Status.RUNNING)
# The counts a run table shows, in this order (a run also records "listed").
COUNTS = {
    "added": gettext_lazy("Added"),
    "changed": gettext_lazy("Changed"),
    "unchanged": gettext_lazy("Unchanged"),
    "renamed": gettext_lazy("Renamed"),
    "deleted": gettext_lazy("Deleted"),
    "failed": gettext_lazy("Failed"),
}


def last_runs(sources: list[Source]) -> dict[int, SyncRun]:
    """Each source's newest run, in one query."""
    runs = SyncRun.objects.filter(source__in=[s.pk for s in sources]).order_by("source_id", "-created_at", "-pk")
    return {run.source_id: run for run in runs.distinct("source_id")}


def run_row(run: SyncRun) -> dict[str, Any]:
    return {"run": run, "counts": [(key, run.counts.get(key, 0)) for key in COUNTS], "active": run.status in ACTIVE}


def _strings() -> dict[str, Any]:
    """What sources.js writes into the page, translated here."""
    return {"status": {value: str(label) for value, label in SyncRun.Status.choices}}


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def sources_page(request: AuthedRequest, collection_id: int) -> HttpResponse:
    """GET: the collection's sources; POST: add one."""
    collection = access_collection(request.user, collection_id, manage=True)
    form = SourceForm(collection, request.POST or None)
    if request.method == "POST":
        added = _save(request, form)
        if added is not None:
            messages.success(request, _("Source “%(name)s” added.") % {"name": added.name})
            return redirect("source", added.pk)
    sources = list(collection.sources.order_by("name"))
    runs = last_runs(sources)
    context = {
        "collection": collection,
        "can_manage": True,
        "rows": [{"source": source, "last": runs.get(source.pk)} for source in sources],
        "form": form,
        "js_strings": _strings(),
    }
    return render(request, "sources/sources.html", context, status=400 if form.is_bound else 200)


def _save(request: AuthedRequest, form: SourceForm) -> Source | None:
    """The source saved through do_save_source, or None with the errors on the form."""
    if not form.is_valid():
        return None
    try:
        return do_save_source(
            form.instance,
            credentials=form.credentials(),
            actor=request.user,
            clear_credentials=form.cleaned_data["clear_credentials"],
        )
    except ValidationError as exc:  # a name taken meanwhile
        form.add_error(None, exc)
        return None


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def source_page(request: AuthedRequest, source_id: int) -> HttpResponse:
    """GET: the source's settings and runs; POST: save its settings."""
    source = access_source(request.user, source_id)
    form = SourceForm(source.collection, request.POST or None, instance=source)
    if request.method == "POST":
        had_credentials = source.has_credentials
        if _save(request, form) is not None:
            messages.success(request, _("Source “%(name)s” saved.") % {"name": source.name})
            if had_credentials and source.credentials_cleared:
                messages.warning(request, credentials_notice(source))
            return redirect("source", source.pk)
        source.refresh_from_db()  # the form changed it in memory; the page shows what is stored
    return render(request, "sources/source.html", _source_context(source, form), status=400 if form.is_bound else 200)


def _source_context(source: Source, form: SourceForm) -> dict[str, Any]:
    runs: QuerySet[SyncRun] = source.runs.select_related("requested_by").order_by("-created_at", "-pk")
    return {
        "collection": source.collection,
        "source": source,
        "can_manage": True,
        "form": form,
        "credentials_notice": credentials_notice(source),
        "runs": [run_row(run) for run in runs[:SHOWN_RUNS]],
        "count_labels": list(COUNTS.values()),
        "syncing": any(run.status in ACTIVE for run in runs[:1]),
        "js_strings": _strings(),
    }


@login_required
@require_POST
def source_sync(request: AuthedRequest, source_id: int) -> HttpResponse:
    """Sync now: a run queued (or the one already queued or running)."""
    source = access_source(request.user, source_id)
    already = source.runs.filter(status__in=ACTIVE).exists()
    do_start_sync(source, trigger=SyncRun.Trigger.MANUAL, actor=request.user)
    if already:
        messages.info(request, _("The source is already syncing: its progress shows below."))
    else:
        messages.success(request, _("Sync queued: its progress shows below."))
    return redirect("source", source.pk)


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def source_delete(request: AuthedRequest, source_id: int) -> HttpResponse:
    """GET: what removing the source removes; POST: remove it and its documents."""
    source = access_source(request.user, source_id)
    collection: Collection = source.collection
    if request.method == "POST":
        name = source.name
        removed = do_delete_source(source)
        message = ngettext(
            "Source “%(name)s” removed, with its %(count)d document.",
            "Source “%(name)s” removed, with its %(count)d documents.",
            removed,
        )
        messages.success(request, message % {"name": name, "count": removed})
        return redirect("collection-sources", collection.pk)
    context = {"collection": collection, "source": source, "documents": source.files.count(), "can_manage": True}
    return render(request, "sources/delete.html", context)


urlpatterns = [
    path("collections/<int:collection_id>/sources/", sources_page, name="collection-sources"),
    path("sources/<int:source_id>/", source_page, name="source"),
    path("sources/<int:source_id>/sync/", source_sync, name="source-sync"),
    path("sources/<int:source_id>/delete/", source_delete, name="source-delete"),
]

"""The Analytics pages: how a collection, or all of a team's collections, is asked and
answers (quality/analytics.py says what each number counts). For the collection's owner or
its team's admins, and a team's admins. `?days=7|30|90` or `?since=&until=` choose the
period; `?export=csv` sends the same report as a CSV file (its layout: quality/analytics.py),
as the analytics API does."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import path
from django.utils.translation import gettext as _
from django.views.decorators.http import require_safe

from knowledge.access import access_collection, access_team
from knowledge.models import Collection
from portal.typing import AuthedRequest
from quality import analytics


@login_required
@require_safe
def collection_analytics(request: AuthedRequest, collection_id: int) -> HttpResponse:
    collection = access_collection(request.user, collection_id, manage=True)
    context = {"collection": collection, "slug": f"collection-{collection.pk}"}
    return _respond(request, [collection.pk], collection.name, context)


@login_required
@require_safe
def team_analytics(request: AuthedRequest, team_id: int) -> HttpResponse:
    team = access_team(request.user, team_id, manage=True)
    ids = list(Collection.objects.filter(owner_team=team).values_list("pk", flat=True))
    return _respond(request, ids, team.name, {"team": team, "slug": f"team-{team.pk}"})


def _respond(request: AuthedRequest, ids: list[int], title: str, context: dict[str, Any]) -> HttpResponse:
    query = request.GET.copy()
    query.setdefault("days", str(analytics.DEFAULT_DAYS))  # the select shows the period shown
    form = analytics.PeriodForm(query)
    export = request.GET.get("export")
    errors = [] if export in (None, "csv") else [_("The only export is “csv”.")]
    if not form.is_valid() or errors:
        errors += [str(message) for messages in form.errors.values() for message in messages]
        context.update(form=form, errors=errors, report=None)
        return render(request, "quality/analytics.html", context, status=400)
    period = form.period()
    report = analytics.collection_report(ids, period.since, period.until)
    if export == "csv":
        return analytics.csv_response(report, title, context["slug"])
    context.update(form=form, errors=[], report=report, csv_query=_csv_query(request))
    return render(request, "quality/analytics.html", context)


def _csv_query(request: AuthedRequest) -> str:
    query = request.GET.copy()
    query["export"] = "csv"
    return query.urlencode()


urlpatterns = [
    path("collections/<int:collection_id>/analytics/", collection_analytics, name="collection-analytics"),
    path("teams/<int:team_id>/analytics/", team_analytics, name="team-analytics"),
]

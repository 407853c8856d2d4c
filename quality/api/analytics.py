"""`GET /api/collections/<id>/analytics/` (its owner or team admins) and
`GET /api/teams/<id>/analytics/` (the team's admins): the numbers of the Analytics pages as
JSON (quality/analytics.py says what each counts), for `days=7|30|90` or `since`/`until`;
`export=csv` sends the same report as the pages' CSV file, like the audit API's export."""

from __future__ import annotations

from typing import Any

from django.http.response import HttpResponseBase
from django.urls import path
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from knowledge.access import access_collection, access_team
from knowledge.api.documents import COLLECTION_ID
from knowledge.api.schema import FORBIDDEN, INVALID
from knowledge.models import Collection
from quality import analytics

EXPORTS = ("csv",)


class NumbersSerializer(serializers.Serializer[dict[str, Any]]):
    questions = serializers.IntegerField(help_text="Questions asked: every answer, failed or cancelled ones too.")
    answers = serializers.IntegerField(help_text="The questions whose answer did not fail.")
    failed = serializers.IntegerField(help_text="The answers that failed or were cancelled.")
    abstained = serializers.IntegerField(help_text="The answers that abstained.")
    abstention_rate = serializers.FloatField(allow_null=True, help_text="abstained / answers; null without answers.")
    rated = serializers.IntegerField(help_text="The answers with feedback.")
    thumbs_down = serializers.IntegerField(help_text="The answers rated not helpful.")
    thumbs_down_rate = serializers.FloatField(allow_null=True, help_text="thumbs_down / rated; null if none is rated.")
    timed = serializers.IntegerField(help_text="The answers (not failed) with a total time.")
    median_ms = serializers.FloatField(allow_null=True, help_text="Median total answer time, milliseconds.")
    p95_ms = serializers.FloatField(
        allow_null=True, help_text="95th percentile of the total answer time (linear interpolation), milliseconds."
    )


class CollectionNumbersSerializer(NumbersSerializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class DaySerializer(serializers.Serializer[dict[str, Any]]):
    day = serializers.DateField()
    questions = serializers.IntegerField()
    answers = serializers.IntegerField()
    failed = serializers.IntegerField()
    abstained = serializers.IntegerField()
    thumbs_down = serializers.IntegerField()


class CitedSerializer(serializers.Serializer[dict[str, Any]]):
    document_id = serializers.IntegerField()
    name = serializers.CharField(help_text="The document's name now.")
    collection_id = serializers.IntegerField()
    collection = serializers.CharField()
    answers = serializers.IntegerField(help_text="The answers citing the document.")


class UnansweredSerializer(serializers.Serializer[dict[str, Any]]):
    question = serializers.CharField(help_text="The question as most recently asked.")
    times = serializers.IntegerField(help_text="How often it was asked (case and spaces ignored).")
    abstained = serializers.IntegerField(help_text="How often the answer abstained (else it cited nothing).")
    last_asked = serializers.DateTimeField()


class ReportSerializer(NumbersSerializer):
    since = serializers.DateField(help_text="The first day of the period (the portal's time zone).")
    until = serializers.DateField(help_text="The last day of the period, included.")
    collections = CollectionNumbersSerializer(
        many=True, help_text="The same numbers per collection, in a team's report (empty in a collection's)."
    )
    days = DaySerializer(many=True, help_text="Every day of the period.")
    most_cited = CitedSerializer(many=True, help_text=f"The {analytics.TOP_CITED} documents most cited.")
    no_good_passage = UnansweredSerializer(
        many=True,
        help_text=f"Up to {analytics.TOP_UNANSWERED} questions whose answer abstained or cited nothing, "
        "the most recently asked first.",
    )


PARAMETERS = [
    OpenApiParameter(
        "days",
        int,
        enum=list(analytics.DAYS),
        description=f"The last 7, 30 or 90 days, today included (default {analytics.DEFAULT_DAYS}).",
    ),
    OpenApiParameter("since", OpenApiTypes.DATE, description="From this day on; wins over `days`."),
    OpenApiParameter(
        "until",
        OpenApiTypes.DATE,
        description=f"Up to this day, included (default: today); at most {analytics.MAX_DAYS} days in all.",
    ),
    OpenApiParameter(
        "export", str, enum=list(EXPORTS), description="`csv`: the report as a CSV file in sections (see the pages)."
    ),
]
RESPONSES = {
    (200, "application/json"): ReportSerializer,
    (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="The report as CSV (`export=csv`)."),
}


class _AnalyticsView(APIView):
    errors = {400: INVALID, 403: FORBIDDEN}

    def scope(self) -> tuple[list[int], str, str]:
        """The collections' ids, the report's title and the CSV file's name."""
        raise NotImplementedError

    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        ids, title, slug = self.scope()
        form = analytics.PeriodForm(request.query_params)
        if not form.is_valid():
            raise ValidationError({field: [str(m) for m in messages] for field, messages in form.errors.items()})
        export = request.query_params.get("export")
        if export is not None and export not in EXPORTS:
            raise ValidationError({"export": [_("The only export is “csv”.")]})
        period = form.period()
        report = analytics.collection_report(ids, period.since, period.until)
        if export == "csv":
            return analytics.csv_response(report, title, slug)
        return Response(ReportSerializer(analytics.as_json(report)).data)


class CollectionAnalyticsView(_AnalyticsView):
    """The collection's analytics: its owner or its team's admins."""

    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    def scope(self) -> tuple[list[int], str, str]:
        collection = access_collection(self.request.user, self.kwargs["collection_id"], manage=True)
        return [collection.pk], collection.name, f"collection-{collection.pk}"

    @extend_schema(parameters=[COLLECTION_ID, *PARAMETERS], responses=RESPONSES)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return super().get(request, *args, **kwargs)


TEAM_ID = OpenApiParameter("team_id", OpenApiTypes.INT, OpenApiParameter.PATH, description="The team's id.")


class TeamAnalyticsView(_AnalyticsView):
    """The analytics of all the team's collections, and of each: the team's admins."""

    def scope(self) -> tuple[list[int], str, str]:
        team = access_team(self.request.user, self.kwargs["team_id"], manage=True)
        ids = list(Collection.objects.filter(owner_team=team).values_list("pk", flat=True))
        return ids, team.name, f"team-{team.pk}"

    @extend_schema(parameters=[TEAM_ID, *PARAMETERS], responses=RESPONSES)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return super().get(request, *args, **kwargs)


urlpatterns = [
    path(
        "collections/<int:collection_id>/analytics/", CollectionAnalyticsView.as_view(), name="collection-analytics-api"
    ),
    path("teams/<int:team_id>/analytics/", TeamAnalyticsView.as_view(), name="team-analytics-api"),
]

"""`GET /api/audit/`: the audit entries the caller may read (knowledge/audit_access.py),
newest first, filtered like the audit page. A page of them as JSON by default (limit/offset
like every list); `export=csv` or `export=json` sends every entry the filters select, as a
CSV file with a header row or a JSON array, streamed as it is read."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.utils import timezone
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework import generics, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

from audit.models import Action, Entry
from knowledge.api.pagination import Pagination
from knowledge.audit_access import MAX_ID, AuditFilterForm, visible_entries

EXPORTS = ("csv", "json")
CSV_COLUMNS = [
    "id",
    "at",
    "actor",
    "action",
    "action_label",
    "object_type",
    "object_id",
    "object_label",
    "team_id",
    "collection_id",
    "changes",
    "ip",
]
# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection):
# such text is written with a leading apostrophe.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
CHUNK = 1000


class AuditEntrySerializer(serializers.ModelSerializer[Entry]):
    actor = serializers.CharField(
        source="actor_label", read_only=True, help_text="The actor's email; empty for the portal itself."
    )
    action_label = serializers.CharField(source="get_action_display", read_only=True)
    changes = serializers.JSONField(read_only=True, help_text='Each changed field: {"field": [before, after]}.')
    ip = serializers.CharField(read_only=True, allow_null=True, help_text="The client's address.")

    class Meta:
        model = Entry
        fields = CSV_COLUMNS  # the export's columns are the API's fields
        read_only_fields = fields


class AuditPageSerializer(serializers.Serializer[dict[str, Any]]):
    """One page, as every paged list answers (for the schema)."""

    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = AuditEntrySerializer(many=True)


def _id(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(
        name, {"type": "integer", "minimum": 1, "maximum": MAX_ID}, OpenApiParameter.QUERY, description=description
    )


PARAMETERS = [
    _id("team", "Only this team's entries: a team the caller administers (another id is a 400)."),
    _id("collection", "Only the entries about this collection (a deleted one's too)."),
    OpenApiParameter("action", str, enum=Action.values, description="Only this action."),
    OpenApiParameter("actor", {"type": "string", "maxLength": 254}, description="The actor's email contains this."),
    OpenApiParameter("since", OpenApiTypes.DATE, description="From this day on (the portal's time zone)."),
    OpenApiParameter("until", OpenApiTypes.DATE, description="Up to this day, included."),
    OpenApiParameter(
        "export",
        str,
        enum=list(EXPORTS),
        description="Every entry the filters select, not one page: `csv` (UTF-8, a header row; "
        "`changes` as JSON) or `json` (an array). `limit` and `offset` are then ignored.",
    ),
]


@extend_schema(
    parameters=PARAMETERS,
    responses={
        (200, "application/json"): OpenApiResponse(
            PolymorphicProxySerializer(
                component_name="AuditEntries",
                serializers=[AuditPageSerializer, AuditEntrySerializer(many=True)],
                resource_type_field_name=None,
                many=False,
            ),
            description="A page of entries (without `export`); every entry as a JSON array (`export=json`) "
            "or as CSV (`export=csv`).",
        ),
        (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="Every entry as CSV (`export=csv`)."),
    },
)
class AuditListView(generics.ListAPIView[Entry]):
    """Audit entries: a team's admins read those of the teams they administer, everyone those
    about themselves (their personal collections, API tokens, memory, logins). Superusers
    read every entry in the Django admin."""

    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    serializer_class = AuditEntrySerializer

    def get_queryset(self) -> QuerySet[Entry]:
        form = AuditFilterForm(self.request.query_params, user=self.request.user)
        if not form.is_valid():
            raise ValidationError({field: [str(m) for m in messages] for field, messages in form.errors.items()})
        return form.filter(visible_entries(self.request.user))

    def list(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:  # type: ignore[override]
        export = request.query_params.get("export")
        if export is None:
            return super().list(request, *args, **kwargs)
        if export not in EXPORTS:
            raise ValidationError({"export": [_("Must be “csv” or “json”.")]})
        paginator = self.paginator
        if isinstance(paginator, Pagination):  # ignored, but checked as documented
            paginator.get_limit(request)
            paginator.get_offset(request)
        entries = self.get_queryset()
        stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
        if export == "csv":
            response = StreamingHttpResponse(csv_lines(entries), content_type="text/csv; charset=utf-8")
        else:
            response = StreamingHttpResponse(json_array(entries), content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.{export}"'
        return response


def _each(entries: QuerySet[Entry]) -> Iterator[Entry]:
    return entries.iterator(chunk_size=CHUNK)


class _Line:
    """What csv.writer writes to: the line it was given, returned."""

    def write(self, value: str) -> str:
        return value


def csv_lines(entries: QuerySet[Entry]) -> Iterable[str]:
    writer = csv.writer(_Line())
    yield writer.writerow(CSV_COLUMNS)
    for entry in _each(entries):
        data = AuditEntrySerializer(entry).data
        data["changes"] = json.dumps(entry.changes, ensure_ascii=False, cls=DjangoJSONEncoder)
        yield writer.writerow([_cell(data[column]) for column in CSV_COLUMNS])


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def json_array(entries: QuerySet[Entry]) -> Iterable[str]:
    yield "["
    for index, entry in enumerate(_each(entries)):
        item = json.dumps(AuditEntrySerializer(entry).data, ensure_ascii=False, cls=DjangoJSONEncoder)
        yield ("," if index else "") + item
    yield "]"

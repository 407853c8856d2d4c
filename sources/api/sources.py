"""A collection's sources over the API, for the people who manage it (sources hold addresses
and credentials): list, add, read, change and remove them, start a sync, read the runs.
Credentials are write-only: a response says whether some are stored, never what they are.
Writes go through sources.actions; its per-field errors become a 400 keyed by field."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from knowledge.access import access_collection, get_or_404
from knowledge.api.documents import COLLECTION_ID
from knowledge.api.views import request_user
from portal.models import User
from sources.access import access_source
from sources.actions import FIELDS, do_delete_source, do_save_source, do_start_sync
from sources.forms import credentials_notice, merged_credentials
from sources.models import Source, SyncRun

RUN_ID = OpenApiParameter("run_id", OpenApiTypes.INT, OpenApiParameter.PATH, description="The run's id.")
SOURCE_ID = OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH, description="The source's id.")
COUNT_NAMES = ("listed", "added", "changed", "unchanged", "renamed", "deleted", "failed")


class FailureSerializer(serializers.Serializer[dict[str, Any]]):
    path = serializers.CharField(help_text="The file's path in the source.")
    error = serializers.CharField(help_text="Why it was skipped.")


class SyncRunSerializer(serializers.ModelSerializer[SyncRun]):
    requested_by = serializers.SerializerMethodField(help_text="Who pressed Sync now; null for a scheduled run.")
    counts = serializers.DictField(
        child=serializers.IntegerField(min_value=0),
        help_text="Files " + ", ".join(COUNT_NAMES) + " (so far, while it runs).",
    )
    failures = FailureSerializer(many=True, help_text="Each file skipped, with the reason.")

    class Meta:
        model = SyncRun
        fields = [
            "id", "source", "status", "trigger", "requested_by", "counts", "failures", "progress", "total", "error",
            "created_at", "started_at", "finished_at",
        ]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.EMAIL)
    def get_requested_by(self, run: SyncRun) -> str | None:
        user = run.requested_by
        return user.email if isinstance(user, User) else None


class LastRunSerializer(serializers.ModelSerializer[SyncRun]):
    counts = serializers.DictField(child=serializers.IntegerField(min_value=0))

    class Meta:
        model = SyncRun
        fields = ["id", "status", "trigger", "counts", "progress", "total", "error", "created_at", "finished_at"]
        read_only_fields = fields


class SourceSerializer(serializers.ModelSerializer[Source]):
    username = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        max_length=500,
        help_text="Git and WebDAV: the user name; S3: the access key id. Omitted or empty: the stored one is kept.",
    )
    password = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=4000,
        help_text="A password, access token or S3 secret key. Omitted or empty: the stored one is kept.",
    )
    clear_credentials = serializers.BooleanField(
        write_only=True, required=False, default=False, help_text="Remove the stored credentials."
    )
    has_credentials = serializers.BooleanField(read_only=True, help_text="Whether credentials are stored.")
    credentials_cleared = serializers.BooleanField(
        read_only=True,
        help_text="True when a change of kind, address (scheme, host, port) or bucket removed the stored "
        "credentials: the source does not sync until new ones are sent, or clear_credentials says to go without.",
    )
    credentials_notice = serializers.SerializerMethodField(
        help_text="What to do about the credentials, in words; empty when nothing is needed."
    )
    last_run = serializers.SerializerMethodField(help_text="The newest sync run; null before the first.")
    include = serializers.CharField(
        required=False, allow_blank=True, max_length=10000, help_text="Glob patterns, one per line; empty: every file."
    )
    exclude = serializers.CharField(
        required=False, allow_blank=True, max_length=10000, help_text="Glob patterns, one per line."
    )

    class Meta:
        model = Source
        fields = [
            "id", "collection", *FIELDS, "username", "password", "clear_credentials", "has_credentials",
            "credentials_cleared", "credentials_notice", "created_at", "last_sync_at", "next_sync_at", "last_run",
        ]  # fmt: skip
        read_only_fields = ["id", "collection", "created_at", "last_sync_at", "next_sync_at"]
        validators: list[Any] = []  # check_source's: the name unique in the collection, and the rest
        extra_kwargs = {
            "url": {
                "help_text": "Server folder: its absolute path under PORTAL_SOURCE_ROOTS. Git: the repository's "
                "https:// address (or a path under PORTAL_SOURCE_ROOTS). WebDAV: the folder's https:// address. "
                "S3: the endpoint's address, empty for AWS. Never with a user name or password in it."
            },
            "branch": {"help_text": "Git: the branch to follow; empty: the default branch."},
            "bucket": {"help_text": "S3: the bucket (required there)."},
            "prefix": {"help_text": "A folder inside the source to sync alone (sub-folder, Git sub-path, S3 prefix)."},
            "target": {"help_text": "The folder in the collection the files go to; empty: its top."},
            "schedule": {"help_text": 'Empty: only by hand; "30m", "6h", "1d"; or five cron fields ("0 3 * * 1-5").'},
            "link_template": {"help_text": "A web address with {path} and optionally {branch}; empty: no link."},
        }

    def get_credentials_notice(self, source: Source) -> str:
        return credentials_notice(source)

    @extend_schema_field(LastRunSerializer(allow_null=True))
    def get_last_run(self, source: Source) -> dict[str, Any] | None:
        run = source.runs.order_by("-created_at", "-pk").first()
        return LastRunSerializer(run).data if run is not None else None


def _fields(data: dict[str, Any]) -> dict[str, Any]:
    return {name: data[name] for name in FIELDS if name in data}


def save(source: Source, data: dict[str, Any], user: User) -> Source:
    """The validated data applied to the source and saved through do_save_source; its
    per-field errors as the API's 400."""
    for name, value in _fields(data).items():
        setattr(source, name, value)
    clear = bool(data.get("clear_credentials"))
    credentials = merged_credentials(source, data.get("username", ""), data.get("password", ""), keep=not clear)
    try:
        return do_save_source(source, credentials=credentials, actor=user, clear_credentials=clear)
    except DjangoValidationError as exc:
        raise serializers.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages) from None


class SourceListView(generics.ListAPIView[Source]):
    """GET: the collection's sources. POST: add one. Both for its owner or team admins."""

    serializer_class = SourceSerializer

    def get_queryset(self) -> QuerySet[Source]:
        if getattr(self, "swagger_fake_view", False):
            return Source.objects.none()
        collection = access_collection(self.request.user, self.kwargs["collection_id"], manage=True)
        return Source.objects.filter(collection=collection).order_by("name", "pk")

    @extend_schema(parameters=[COLLECTION_ID])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(parameters=[COLLECTION_ID], request=SourceSerializer, responses={201: SourceSerializer})
    def post(self, request: Request, collection_id: int) -> Response:
        collection = access_collection(request_user(request), collection_id, manage=True)
        form = SourceSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        added = save(Source(collection=collection), form.validated_data, request_user(request))
        return Response(SourceSerializer(added).data, status=status.HTTP_201_CREATED)


class SourceDetailView(generics.RetrieveUpdateDestroyAPIView[Source]):
    """GET, PATCH, DELETE: one source (its owner or team admins); PATCH changes the fields
    sent; DELETE removes the documents it brought in too."""

    serializer_class = SourceSerializer
    queryset = Source.objects.none()  # for the schema; get_object checks access
    http_method_names = ["get", "patch", "delete", "head", "options"]

    def get_object(self) -> Source:
        return access_source(self.request.user, self.kwargs["pk"])

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        source = self.get_object()  # access before validation: strangers get 404, not 400
        form = SourceSerializer(source, data=request.data, partial=True)
        form.is_valid(raise_exception=True)
        return Response(SourceSerializer(save(source, form.validated_data, request_user(request))).data)

    def perform_destroy(self, instance: Source) -> None:
        do_delete_source(instance)


class SourceSyncView(generics.GenericAPIView[SyncRun]):
    serializer_class = SyncRunSerializer
    queryset = SyncRun.objects.none()  # for the schema; post checks access

    @extend_schema(
        parameters=[SOURCE_ID],
        request=None,
        responses={202: SyncRunSerializer},
        description="Queues a sync of the source now; a source already queued or syncing answers that run.",
    )
    def post(self, request: Request, pk: int) -> Response:
        source = access_source(request_user(request), pk)
        run = do_start_sync(source, trigger=SyncRun.Trigger.MANUAL, actor=request_user(request))
        return Response(SyncRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class SyncRunListView(generics.ListAPIView[SyncRun]):
    """GET: the source's sync runs, newest first."""

    serializer_class = SyncRunSerializer

    def get_queryset(self) -> QuerySet[SyncRun]:
        if getattr(self, "swagger_fake_view", False):
            return SyncRun.objects.none()
        source = access_source(self.request.user, self.kwargs["pk"])
        return source.runs.select_related("requested_by").order_by("-created_at", "-pk")

    @extend_schema(parameters=[SOURCE_ID])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


class SyncRunDetailView(generics.RetrieveAPIView[SyncRun]):
    """GET: one sync run of the source, with each file it skipped."""

    serializer_class = SyncRunSerializer

    def get_object(self) -> SyncRun:
        source = access_source(self.request.user, self.kwargs["pk"])
        found: SyncRun = get_or_404(source.runs.select_related("requested_by"), self.kwargs["run_id"])
        return found

    @extend_schema(parameters=[SOURCE_ID, RUN_ID])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


urlpatterns = [
    path("collections/<int:collection_id>/sources/", SourceListView.as_view(), name="collection-source-list"),
    path("sources/<int:pk>/", SourceDetailView.as_view(), name="source-detail"),
    path("sources/<int:pk>/sync/", SourceSyncView.as_view(), name="source-sync-api"),
    path("sources/<int:pk>/runs/", SyncRunListView.as_view(), name="source-run-list"),
    path("sources/<int:pk>/runs/<int:run_id>/", SyncRunDetailView.as_view(), name="source-run-detail"),
]

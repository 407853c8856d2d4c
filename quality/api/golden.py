"""A collection's golden questions over the API: anyone who sees the collection lists and
reads them; its owner or team admins create, change, delete, import and export them, and
turn a feedback item into one. The rules are quality.golden's, the writes quality.actions'."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.http import HttpResponse
from django.urls import path
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from assistant.retrieval.evaluation import LANGS, TYPES
from knowledge.access import access_collection, get_or_404
from knowledge.api.documents import COLLECTION_ID
from knowledge.api.parsers import BoundedJSONParser
from knowledge.api.views import request_user
from knowledge.models import Collection, Document
from quality import actions, golden
from quality.golden import MAX_KEY, MAX_QUESTION
from quality.models import Feedback, GoldenQuestion

JSONL = "application/x-ndjson"


class GoldEntrySerializer(serializers.Serializer[dict[str, Any]]):
    file = serializers.CharField(max_length=255, help_text="The name of a document of the collection.")
    page = serializers.IntegerField(
        min_value=0, required=False, help_text="Its page, slide or minute from 1; 0 or none: any page of the file."
    )


class GoldenTurnSerializer(serializers.Serializer[dict[str, Any]]):
    role = serializers.ChoiceField(choices=["user", "assistant"])
    content = serializers.CharField()


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "minLength": 1},
            {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
        ],
        "description": "A value a right answer must say, or its alternative spellings.",
    }
)
class AnswerKeyField(serializers.Field):
    def to_internal_value(self, data: Any) -> Any:
        spellings = [data] if isinstance(data, str) else data
        if not isinstance(spellings, list) or not spellings or not all(isinstance(s, str) and s for s in spellings):
            raise serializers.ValidationError(_("A key is a non-empty text or a list of them."))
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class GoldenQuestionSerializer(serializers.ModelSerializer[GoldenQuestion]):
    key = serializers.CharField(
        max_length=MAX_KEY, required=False, allow_blank=True, help_text="Unique in the collection; empty: q-<n>."
    )
    question = serializers.CharField(max_length=MAX_QUESTION)
    lang = serializers.ChoiceField(
        choices=LANGS, required=False, help_text="The question's language; by default, detected from it."
    )
    kind = serializers.ChoiceField(choices=TYPES, required=False, help_text='"unanswerable": should abstain.')
    gold = GoldEntrySerializer(many=True, required=False, help_text="The pages that answer it.")
    keys = serializers.ListField(child=AnswerKeyField(), required=False)
    history = GoldenTurnSerializer(many=True, required=False, help_text="The turns before it (a follow-up).")
    stale = serializers.SerializerMethodField(help_text="Its expected file is no longer in the collection.")

    class Meta:
        model = GoldenQuestion
        fields = [
            "id", "key", "question", "lang", "kind", "gold", "keys", "history", "feedback", "stale", "created_at",
            "updated_at",
        ]  # fmt: skip
        read_only_fields = ["id", "feedback", "stale", "created_at", "updated_at"]

    def get_stale(self, obj: GoldenQuestion) -> bool:
        present = self.context.get("present")
        if present is None:
            present = set(Document.objects.filter(collection=obj.collection_id).values_list("name", flat=True))
        return not obj.should_abstain and not obj.files() <= present


def _fields(data: dict[str, Any]) -> dict[str, Any]:
    """A serializer's validated data as the fields of quality.golden's writes."""
    return {name: data[name] for name in golden.FIELDS if name in data}


class GoldenListView(generics.ListAPIView[GoldenQuestion]):
    """GET: the collection's golden questions. POST (owner or team admin): add one."""

    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    serializer_class = GoldenQuestionSerializer

    def get_queryset(self) -> QuerySet[GoldenQuestion]:
        if getattr(self, "swagger_fake_view", False):
            return GoldenQuestion.objects.none()
        collection = access_collection(self.request.user, self.kwargs["collection_id"])
        return GoldenQuestion.objects.filter(collection=collection).order_by("key", "pk")

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        if "collection_id" in self.kwargs and not getattr(self, "swagger_fake_view", False):
            names = Document.objects.filter(collection=self.kwargs["collection_id"]).values_list("name", flat=True)
            context["present"] = set(names)
        return context

    @extend_schema(parameters=[COLLECTION_ID])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        parameters=[COLLECTION_ID], request=GoldenQuestionSerializer, responses={201: GoldenQuestionSerializer}
    )
    def post(self, request: Request, collection_id: int) -> Response:
        collection = access_collection(request_user(request), collection_id, manage=True)
        form = GoldenQuestionSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        added = actions.do_add_golden(collection, request_user(request), **_fields(form.validated_data))
        return Response(GoldenQuestionSerializer(added).data, status=status.HTTP_201_CREATED)


class GoldenDetailView(generics.RetrieveUpdateDestroyAPIView[GoldenQuestion]):
    """GET: one golden question. PUT, PATCH, DELETE (owner or team admin): change or delete it;
    PUT leaves out of a field what is not sent (no keys, no pages), except the id, kept."""

    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    serializer_class = GoldenQuestionSerializer

    def get_object(self) -> GoldenQuestion:
        manage = self.request.method not in ("GET", "HEAD", "OPTIONS")
        collection = access_collection(self.request.user, self.kwargs["collection_id"], manage=manage)
        found: GoldenQuestion = get_or_404(
            GoldenQuestion.objects.filter(collection=collection).select_related("collection"), self.kwargs["pk"]
        )
        return found

    @extend_schema(parameters=[COLLECTION_ID])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(parameters=[COLLECTION_ID])
    def put(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().put(request, *args, **kwargs)

    @extend_schema(parameters=[COLLECTION_ID])
    def patch(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().patch(request, *args, **kwargs)

    @extend_schema(parameters=[COLLECTION_ID])
    def delete(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().delete(request, *args, **kwargs)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        partial = kwargs.pop("partial", False)
        question = self.get_object()  # access before validation: strangers get 404, not 400
        form = GoldenQuestionSerializer(question, data=request.data, partial=partial)
        form.is_valid(raise_exception=True)
        fields = _fields(form.validated_data)
        if not partial:
            fields = {"lang": "", "kind": "fact", "gold": [], "keys": [], "history": [], **fields}
        actions.do_update_golden(question, **fields)
        return Response(GoldenQuestionSerializer(question).data)

    def perform_destroy(self, instance: GoldenQuestion) -> None:
        actions.do_delete_golden(instance)


class JsonLinesParser(BaseParser):
    """A JSON Lines body, as its text (golden.read_import: its size and encoding checked)."""

    media_type = JSONL

    def parse(  # type: ignore[override]
        self, stream: Any, media_type: str | None = None, parser_context: Any = None
    ) -> str:
        return golden.read_import(stream) if stream else ""


class PlainTextParser(JsonLinesParser):
    media_type = "text/plain"


class ImportErrorSerializer(serializers.Serializer[dict[str, Any]]):
    line = serializers.IntegerField(help_text="The line's number from 1; 0: the file as a whole.")
    error = serializers.CharField()


class ImportResultSerializer(serializers.Serializer[dict[str, Any]]):
    imported = serializers.IntegerField(help_text="Questions added.")
    updated = serializers.IntegerField(help_text="Questions whose id the collection had: changed.")
    errors = ImportErrorSerializer(  # type: ignore[assignment]
        many=True, help_text="The lines not imported, each with its reason."
    )


class GoldenImportView(APIView):
    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)
    parser_classes = [JsonLinesParser, PlainTextParser, MultiPartParser]

    @extend_schema(
        parameters=[COLLECTION_ID],
        request={
            JSONL: OpenApiTypes.STR,
            "text/plain": OpenApiTypes.STR,
            "multipart/form-data": {
                "type": "object",
                "properties": {"file": {"type": "string", "format": "binary"}},
                "required": ["file"],
            },
        },
        responses={
            200: OpenApiResponse(ImportResultSerializer, description="At least one question was added or updated."),
            400: OpenApiResponse(
                ImportResultSerializer,
                description="Nothing was stored: each line's reason, or line 0 for the file as a whole (no file, "
                "larger than 5 MB, not UTF-8, no question, more than 5,000).",
            ),
        },
        description="Imports golden questions in the public evaluation's JSON Lines format: the body, or a "
        "multipart `file`; UTF-8, at most 5 MB and 5,000 questions, split into lines at line feeds only. A "
        "line whose id the collection has updates that question. Each bad line (not JSON, nested more than 32 "
        "levels, an unknown language or kind, a file the collection lacks, an id used twice) is reported with "
        "its number and reason and the good lines are stored, all in one transaction: 200 when any was "
        "stored, else 400 with the same report.",
    )
    def post(self, request: Request, collection_id: int) -> Response:
        collection = access_collection(request_user(request), collection_id, manage=True)
        try:
            text = _import_text(request)
        except DjangoValidationError as exc:
            result = golden.ImportResult(errors=[(0, " ".join(exc.messages))])
        else:
            result = actions.do_import_golden(collection, request_user(request), text)
        body = {
            "imported": result.imported,
            "updated": result.updated,
            "errors": [{"line": line, "error": error} for line, error in result.errors],
        }
        code = status.HTTP_200_OK if result.stored else status.HTTP_400_BAD_REQUEST
        return Response(ImportResultSerializer(body).data, status=code)


def _import_text(request: Request) -> str:
    """The import's text: the body, or the multipart field "file"; DjangoValidationError
    when neither is there or the file is refused (golden.read_import)."""
    try:
        data = request.data  # parsed here: a body too large or not UTF-8 raises
    except ParseError as exc:  # a malformed multipart body: the report's shape too
        raise DjangoValidationError(str(exc.detail)) from None
    if isinstance(data, str):
        return data
    upload = request.FILES.get("file")
    if upload is None:
        raise DjangoValidationError(_("Send the questions as the body or as multipart field “file”."))
    return golden.read_import(upload)


class GoldenExportView(APIView):
    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    @extend_schema(
        parameters=[COLLECTION_ID],
        responses={(200, JSONL): OpenApiResponse(OpenApiTypes.STR, description="One question a line.")},
    )
    def get(self, request: Request, collection_id: int) -> HttpResponse:
        collection = access_collection(request_user(request), collection_id, manage=True)
        return HttpResponse(golden.export_jsonl(collection), content_type=f"{JSONL}; charset=utf-8")


class FeedbackCollectionSerializer(serializers.Serializer[dict[str, Any]]):
    collection = serializers.IntegerField(
        min_value=1,
        required=False,
        help_text="A collection the answer searched and the caller manages; by default, the only one it searched.",
    )


class FeedbackGoldenView(APIView):
    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)
    parser_classes = [BoundedJSONParser]

    @extend_schema(
        request=FeedbackCollectionSerializer,
        responses={201: GoldenQuestionSerializer},
        description="Turns the feedback into a golden question of the collection: its question, with the "
        "corrected page expected (or, for a helpful answer, the page its first citation named).",
    )
    def post(self, request: Request, pk: int) -> Response:
        user = request_user(request)
        feedback: Feedback = get_or_404(Feedback.objects.visible_to(user), pk)
        form = FeedbackCollectionSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        chosen = form.validated_data.get("collection") or _only_collection(feedback)
        if chosen is None:
            raise serializers.ValidationError({"collection": [_("The answer searched several collections: name one.")]})
        collection = access_collection(user, chosen, manage=True)
        made = actions.do_golden_from_feedback(feedback, collection, user)
        return Response(GoldenQuestionSerializer(made).data, status=status.HTTP_201_CREATED)


def _only_collection(feedback: Feedback) -> int | None:
    ids = list(Collection.objects.filter(pk__in=feedback.collections.values("pk")).values_list("pk", flat=True)[:2])
    return ids[0] if len(ids) == 1 else None


urlpatterns = [
    path("collections/<int:collection_id>/golden-questions/", GoldenListView.as_view(), name="collection-golden-list"),
    path(
        "collections/<int:collection_id>/golden-questions/import/",
        GoldenImportView.as_view(),
        name="collection-golden-import-api",
    ),
    path(
        "collections/<int:collection_id>/golden-questions/export/",
        GoldenExportView.as_view(),
        name="collection-golden-export-api",
    ),
    path(
        "collections/<int:collection_id>/golden-questions/<int:pk>/",
        GoldenDetailView.as_view(),
        name="collection-golden-detail",
    ),
    path("feedback/<int:pk>/golden/", FeedbackGoldenView.as_view(), name="feedback-golden"),
]

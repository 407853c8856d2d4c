"""A collection's evaluation runs: list and read them (anyone who sees the collection),
queue one (its owner or team admins)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from knowledge.access import access_collection, get_or_404
from knowledge.api.documents import COLLECTION_ID
from knowledge.api.views import request_user
from knowledge.models import IndexVersion
from quality import actions
from quality.models import EvaluationRun


class EvaluationRunSerializer(serializers.ModelSerializer[EvaluationRun]):
    done = serializers.IntegerField(source="progress", read_only=True)  # questions done, as the API always said

    class Meta:
        model = EvaluationRun
        fields = [
            "id", "version_number", "baseline_number", "purpose", "answers", "status", "done", "total", "stale",
            "error", "summary", "drops", "decision", "created_at", "started_at", "finished_at", "seconds",
        ]  # fmt: skip
        read_only_fields = fields


class EvaluationRunDetailSerializer(EvaluationRunSerializer):
    class Meta(EvaluationRunSerializer.Meta):
        fields = [*EvaluationRunSerializer.Meta.fields, "per_question"]
        read_only_fields = fields


class EvaluateSerializer(serializers.Serializer[Any]):
    version = serializers.IntegerField(
        min_value=1, required=False, help_text="The version number to evaluate; default: the active one."
    )
    answers = serializers.BooleanField(default=False, help_text="Also answer every question and score it (slow).")


class EvaluationListView(generics.ListAPIView[EvaluationRun]):
    """GET: the collection's evaluation runs, newest first. POST (owner or team admin):
    evaluate a kept index version on the collection's golden questions."""

    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    serializer_class = EvaluationRunSerializer

    def get_queryset(self) -> QuerySet[EvaluationRun]:
        if getattr(self, "swagger_fake_view", False):
            return EvaluationRun.objects.none()
        collection = access_collection(self.request.user, self.kwargs["collection_id"])
        return EvaluationRun.objects.filter(collection=collection)

    @extend_schema(parameters=[COLLECTION_ID])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(parameters=[COLLECTION_ID], request=EvaluateSerializer, responses={201: EvaluationRunSerializer})
    def post(self, request: Request, collection_id: int) -> Response:
        collection = access_collection(request_user(request), collection_id, manage=True)
        asked = EvaluateSerializer(data=request.data)
        asked.is_valid(raise_exception=True)
        number = asked.validated_data.get("version")
        found = IndexVersion.objects.filter(collection=collection).exclude(status=IndexVersion.Status.FAILED)
        version = (
            found.filter(number=number).first()
            if number
            else found.filter(pk=collection.active_version_id or 0).first()
        )
        if version is None:
            raise serializers.ValidationError(
                {"version": ["The collection has no kept index version with that number."]}
            )
        answers = asked.validated_data["answers"]
        run = actions.do_start_evaluation(collection, version, user=request_user(request), answers=answers)
        return Response(EvaluationRunSerializer(run).data, status=status.HTTP_201_CREATED)


class EvaluationDetailView(generics.RetrieveAPIView[EvaluationRun]):
    """GET: one run, with each question's result."""

    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    serializer_class = EvaluationRunDetailSerializer

    def get_object(self) -> EvaluationRun:
        collection = access_collection(self.request.user, self.kwargs["collection_id"])
        found: EvaluationRun = get_or_404(EvaluationRun.objects.filter(collection=collection), self.kwargs["pk"])
        return found

    @extend_schema(parameters=[COLLECTION_ID])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


urlpatterns = [
    path(
        "collections/<int:collection_id>/evaluations/", EvaluationListView.as_view(), name="collection-evaluation-list"
    ),
    path(
        "collections/<int:collection_id>/evaluations/<int:pk>/",
        EvaluationDetailView.as_view(),
        name="collection-evaluation-detail",
    ),
]

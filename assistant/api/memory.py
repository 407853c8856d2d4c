"""/api/memories/: what the portal remembers about the caller, and only the caller: list or
search, read, edit, delete one, delete all, export (JSON), and each memory's history. Another
user's memory ids are 404 here, as ids that never existed."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from assistant.api.serializers import DeletedSerializer, ExportSerializer, MemoryChangeSerializer, MemorySerializer
from assistant.memory.service import (
    Memories,
    MemoryInputError,
    MemoryItem,
    MemoryNotFound,
    MemoryUnavailable,
    memories,
)
from knowledge.api.schema import error
from knowledge.api.views import request_user

MAX_SEARCH_RESULTS = 50


class MemoryOff(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "memory_unavailable"


def store() -> Memories:
    try:
        return memories()
    except MemoryUnavailable as exc:
        raise MemoryOff(_("Memory is not available: %(reason)s") % {"reason": exc}) from exc


class MemoryViewSet(viewsets.GenericViewSet[Any]):
    serializer_class = MemorySerializer
    errors = {503: error("Memory is turned off (PORTAL_MEMORY) or cannot be reached.")}
    lookup_value_regex = "[^/]+"

    def _item(self, request: Request, pk: str) -> MemoryItem:
        try:
            return store().get(request_user(request), pk)
        except MemoryNotFound:
            raise NotFound(_("That memory does not exist.")) from None

    @extend_schema(
        parameters=[
            OpenApiParameter("q", str, description="Search: the memories about this text, best first."),
            OpenApiParameter("limit", int),
            OpenApiParameter("offset", int),
        ],
        responses=MemorySerializer(many=True),
    )
    def list(self, request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        user = request_user(request)
        items = store().search(user, query, limit=MAX_SEARCH_RESULTS) if query else store().listing(user)
        page = self.paginate_queryset(items)
        return self.get_paginated_response(MemorySerializer(page, many=True).data)  # type: ignore[arg-type]

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(MemorySerializer(self._item(request, pk)).data)

    @extend_schema(request=MemorySerializer, responses=MemorySerializer)
    def partial_update(self, request: Request, pk: str) -> Response:
        self._item(request, pk)
        serializer = MemorySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            item = store().update(request_user(request), pk, serializer.validated_data["text"])
        except MemoryInputError as exc:
            raise ValidationError({"text": [str(exc)]}) from None
        except MemoryNotFound:
            raise NotFound(_("That memory does not exist.")) from None
        return Response(MemorySerializer(item).data)

    def destroy(self, request: Request, pk: str) -> Response:
        try:
            store().delete(request_user(request), pk)
        except MemoryNotFound:
            raise NotFound(_("That memory does not exist.")) from None
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses=DeletedSerializer)
    @action(detail=False, methods=["post"], url_path="delete-all")
    def delete_all(self, request: Request) -> Response:
        """Forget everything: every memory of the caller, with its history."""
        return Response({"deleted": store().delete_all(request_user(request))})

    @extend_schema(responses=ExportSerializer)
    @action(detail=False, methods=["get"])
    def export(self, request: Request) -> Response:
        """Every memory of the caller with its history, as a JSON file."""
        response = Response(store().export(request_user(request)))
        response["Content-Disposition"] = 'attachment; filename="memories.json"'
        return response

    @extend_schema(responses=MemoryChangeSerializer(many=True))
    @action(detail=True, methods=["get"])
    def history(self, request: Request, pk: str) -> Response:
        try:
            changes = store().history(request_user(request), pk)
        except MemoryNotFound:
            raise NotFound(_("That memory does not exist.")) from None
        return Response(MemoryChangeSerializer(changes, many=True).data)  # type: ignore[arg-type]

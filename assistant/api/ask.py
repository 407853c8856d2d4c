"""POST /api/ask/: one question, answered as one JSON object, or as Server-Sent Events (the
websocket's events, one per `event:`) when the client sends `Accept: text/event-stream`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from django.http import StreamingHttpResponse
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, Throttled, ValidationError
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from assistant.answering.events import Event, Failed, collect
from assistant.answering.pipeline import answer_events, streamed_events
from assistant.answering.session import AskError, Session, start
from assistant.api.serializers import AskRequestSerializer, AskResponseSerializer
from knowledge.api.schema import EVENT_STREAM, NOT_FOUND, SSE_EVENT, THROTTLED
from knowledge.api.views import request_user
from portal.limits import allow_question


class EventStreamRenderer(BaseRenderer):
    """Lets DRF accept `Accept: text/event-stream`; errors before the stream starts become one
    `error` event."""

    media_type = "text/event-stream"
    format = "sse"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        message = data.get("detail", data) if isinstance(data, dict) else data
        return sse(Failed("invalid", str(message))).encode()


def sse(event: Event) -> str:
    return f"event: {event.type}\ndata: {json.dumps(event.to_json(), ensure_ascii=False)}\n\n"


class AskView(APIView):
    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)
    reads_only = True  # a read-only API token may ask (knowledge.api.authentication)
    renderer_classes = [JSONRenderer, EventStreamRenderer]

    @extend_schema(
        request=AskRequestSerializer,
        responses={
            (200, "application/json"): AskResponseSerializer,
            (200, EVENT_STREAM): OpenApiResponse(
                SSE_EVENT, description="With `Accept: text/event-stream`: the chat's events, one per `event:`."
            ),
            (404, "application/json"): NOT_FOUND,
            (404, EVENT_STREAM): OpenApiResponse(SSE_EVENT),
            (429, "application/json"): THROTTLED,
            (429, EVENT_STREAM): OpenApiResponse(SSE_EVENT),
            (502, "application/json"): OpenApiResponse(
                AskResponseSerializer, description="The model failed: what was answered so far, and `error`."
            ),
        },
    )
    def post(self, request: Request) -> Response | StreamingHttpResponse:
        form = AskRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        if not allow_question(request_user(request).pk):
            raise Throttled(detail=_("Too many questions in a minute; wait a little and ask again."))
        try:
            session = start(
                request.user,
                data["question"],
                collection_ids=data.get("collections") or None,
                conversation_id=data.get("conversation"),
            )
        except AskError as exc:
            raise (NotFound if exc.code == "not_found" else ValidationError)({"detail": exc.message}) from None
        if request.accepted_renderer.format == "sse":
            response = StreamingHttpResponse(_stream(session), content_type="text/event-stream; charset=utf-8")
            response["Cache-Control"] = "no-cache"
            response["X-Accel-Buffering"] = "no"  # nginx: pass events on as they come
            return response
        result = collect(answer_events(session))
        failed = result["error"] is not None
        return Response(result, status=status.HTTP_502_BAD_GATEWAY if failed else status.HTTP_200_OK)


async def _stream(session: Session) -> AsyncIterator[str]:
    async for event in streamed_events(session):
        yield sse(event)

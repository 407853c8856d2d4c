"""What every API view shares in its OpenAPI description and its paging: the error answers
(401, 403, 404, 400 where they can happen; each view adds its own 429, 502, 503 or 416), and
`limit`/`offset` checked as documented (a 400 for `limit=abc`, not the first page).
tests/hardening/test_schema.py checks the running portal against this description."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework import pagination, serializers

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class ErrorSerializer(serializers.Serializer[dict[str, Any]]):
    detail = serializers.CharField(help_text="What went wrong, for a person to read.")


def error(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=description)


INVALID = OpenApiResponse(
    OpenApiTypes.OBJECT,
    description="Invalid input: each field's messages by field name, or `detail` with the messages.",
)
UNAUTHENTICATED = error("No credentials, or an invalid or revoked token.")
FORBIDDEN = error("Signed in but not allowed: a viewer writing, a member managing; a session without its CSRF token.")
NOT_FOUND = error("No such object, or one the caller may not see (the two are not told apart).")
THROTTLED = error("Too many requests this minute; `Retry-After` is not sent, wait and try again.")


# One Server-Sent Event (the ask's stream, errors included): `event:` is the event's type,
# `data:` the event as JSON.
SSE_EVENT = {
    "type": "object",
    "properties": {"event": {"type": "string"}, "data": {"type": "string", "description": "The event, as JSON."}},
    "required": ["event", "data"],
}
EVENT_STREAM = "text/event-stream"


class ApiSchema(AutoSchema):
    """Adds the errors an operation can answer with, unless the view documents that code itself;
    a view's `errors` ({status: response}) adds its own to all its operations."""

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        streams = EVENT_STREAM in self.map_renderers("media_type")
        for code, response in self._errors().items():
            if str(code) in responses:
                continue
            body = self._get_response_for_code(response, str(code), ["application/json"], direction=direction)
            if streams:  # an error before the stream starts is one `error` event
                body["content"][EVENT_STREAM] = {"schema": SSE_EVENT}
            responses[str(code)] = body
        return responses

    def _get_paginator(self) -> pagination.BasePagination | None:
        # Only lists read with GET are paged: not a memory's history, nor an upload's results.
        if self.method != "GET" or getattr(self.view, "action", None) not in (None, "list"):
            return None
        return super()._get_paginator()

    def _errors(self) -> dict[int, OpenApiResponse]:
        errors = {401: UNAUTHENTICATED}
        writes = self.method not in SAFE_METHODS
        if writes:
            errors[403] = FORBIDDEN
        if writes or (self._is_list_view() and self._get_paginator()):
            errors[400] = INVALID
        if "{" in self.path:
            errors[404] = NOT_FOUND
        return {**errors, **getattr(self.view, "errors", {})}

"""An OpenAI-compatible endpoint, so that any program written for the OpenAI API can ask the
portal: `GET /v1/models` lists the collections the user may read as models (`kb-all`, and
`kb-<id>` for each), and `POST /v1/chat/completions` answers the last user message from the
model's collections, the earlier messages being the conversation's history; streamed as
`chat.completion.chunk` events (`stream: true`) or as one `chat.completion`. Citations come
as numbered footnotes after the answer and as `citations` on the message. Authenticated by
the REST API's tokens (`Authorization: Bearer <key>`); errors in OpenAI's shape
(`{"error": {"message", "type", "param", "code"}}`)."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import AsyncIterator
from typing import Any

from django.http import StreamingHttpResponse
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, NotFound, Throttled, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView, exception_handler

from agents.tools import message_of
from assistant.answering.events import AnswerDelta, AnswerReplaced, Event, collect
from assistant.answering.pipeline import answer_events, streamed_events
from assistant.answering.session import AskError, Session, start
from assistant.answering.types import Turn
from common.text import storable
from knowledge.api.views import request_user, server_error_detail
from knowledge.models import Collection
from portal.limits import allow_question

log = logging.getLogger(__name__)
ALL = "kb-all"
# ASCII digits, as GET /v1/models writes them: str.isdigit() also takes "²" and "①", which
# int() refuses. 18 digits at most: every one fits the primary key's bigint.
MODEL_ID = re.compile(r"kb-([1-9][0-9]{0,17})")
MAX_MESSAGES = 200
# The `type` and `code` of an error the views raise, by status; a 404 they raise is always a
# model the user may not use.
ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "permission_denied"),
    404: ("invalid_request_error", "model_not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    429: ("rate_limit_exceeded", "rate_limit_exceeded"),
}


def error_body(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    """An error in OpenAI's shape: the views' (their status's code), and every other error
    status under /v1/ (portal.views.json_error: a path no route matches, a body too large)."""
    kind = ERROR_TYPES.get(status, ("invalid_request_error" if status < 500 else "api_error", None))[0]
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def openai_errors(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's errors in the shape OpenAI's clients read."""
    response = exception_handler(exc, context)
    if response is None:
        return None
    code = ERROR_TYPES.get(response.status_code, ("", None))[1]
    response.data = error_body(response.status_code, message_of(response.data), code)
    return response


@extend_schema(exclude=True)  # OpenAI's API, documented there and in docs/integrations.md
class OpenAIView(APIView):
    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    def get_exception_handler(self) -> Any:
        return openai_errors


class ModelsView(OpenAIView):
    def get(self, request: Request) -> Response:
        rows = Collection.objects.visible_to(request.user).order_by("pk").values_list("pk", "name", "created_at")
        now = int(time.time())
        models = [{"id": ALL, "object": "model", "created": now, "owned_by": "portal", "name": _("All collections")}]
        models += [
            {
                "id": f"kb-{pk}",
                "object": "model",
                "created": int(created.timestamp()),
                "owned_by": "portal",
                "name": name,
            }
            for pk, name, created in rows
        ]
        return Response({"object": "list", "data": models})


class MessageSerializer(serializers.Serializer[dict[str, Any]]):
    role = serializers.ChoiceField(choices=["system", "developer", "user", "assistant", "tool"])
    content = serializers.JSONField(required=False, allow_null=True)

    def validate_content(self, value: Any) -> str:
        """A string, or OpenAI's list of parts of which the text ones are read."""
        if value is None:
            return ""
        if isinstance(value, list):
            value = "\n".join(
                str(part.get("text", "")) for part in value if isinstance(part, dict) and part.get("type") == "text"
            )
        if not isinstance(value, str):
            raise serializers.ValidationError(_("Give the content as text, or as a list of text parts."))
        # Every message, not only the question: the earlier ones are stored and read as the
        # conversation's history, and PostgreSQL stores neither a NUL nor a lone surrogate.
        if not storable(value):
            raise serializers.ValidationError(_("The message holds characters that are not text; send it again."))
        return value


class CompletionRequestSerializer(serializers.Serializer[dict[str, Any]]):
    model = serializers.CharField(max_length=40)
    messages = serializers.ListField(child=MessageSerializer(), allow_empty=False, max_length=MAX_MESSAGES)
    stream = serializers.BooleanField(default=False)


def collections_of(model: str) -> list[int] | None:
    """The collection ids a model names (None: all the user may read); NotFound otherwise."""
    if model == ALL:
        return None
    if found := MODEL_ID.fullmatch(model):
        return [int(found[1])]
    raise NotFound(
        _("The model “%(model)s” does not exist: GET /v1/models lists the ones you may use.") % {"model": model}
    )


def history_of(messages: list[dict[str, Any]]) -> list[Turn]:
    """Each user message with the assistant message that followed it."""
    turns: list[Turn] = []
    for message in messages:
        if message["role"] == "user":
            turns.append(Turn(message["content"], ""))
        elif message["role"] == "assistant" and turns and not turns[-1].answer:
            turns[-1] = Turn(turns[-1].question, message["content"])
    return [turn for turn in turns if turn.answer]


def footnotes(citations: list[dict[str, Any]]) -> str:
    """The citations as numbered notes after the answer: [1] file, place."""
    lines = [f"[{c['n']}] {c['file']}, {c['place']}" for c in citations]
    return "\n\n" + "\n".join(lines) if lines else ""


def portal_citations(citations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keep = ("n", "file", "path", "page", "place", "chunk_id", "document_id", "page_id", "quote")
    return [{key: c.get(key) for key in keep} for c in citations]


class ChatCompletionsView(OpenAIView):
    reads_only = True  # a read-only API token may ask (knowledge.api.authentication)

    def post(self, request: Request) -> Response | StreamingHttpResponse:
        form = CompletionRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        messages = data["messages"]
        if messages[-1]["role"] != "user" or not messages[-1]["content"].strip():
            raise ValidationError({"messages": _("The last message must be the user's question.")})
        collection_ids = collections_of(data["model"])
        if not allow_question(request_user(request).pk):
            raise Throttled(detail=_("Too many questions in a minute; wait a little and ask again."))
        try:
            session = start(
                request.user,
                messages[-1]["content"],
                collection_ids=collection_ids,
                history=history_of(messages[:-1]),
            )
        except AskError as exc:
            if exc.code == "not_found":
                raise NotFound(_("The model “%(model)s” does not exist.") % {"model": data["model"]}) from None
            raise ValidationError({"messages": exc.message}) from None
        if data["stream"]:
            response = StreamingHttpResponse(
                _stream(session, data["model"]), content_type="text/event-stream; charset=utf-8"
            )
            response["Cache-Control"] = "no-cache"
            response["X-Accel-Buffering"] = "no"
            return response
        result = collect(answer_events(session))
        if result["error"] is not None:
            raise ModelFailed(result["error"]["message"])
        body = {
            "id": f"chatcmpl-{session.question_message.pk}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": data["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": result["answer"] + footnotes(result["citations"]),
                        "citations": portal_citations(result["citations"]),
                    },
                    "finish_reason": "stop",
                }
            ],
            "conversation": result["conversation"],
        }
        return Response(body, status=status.HTTP_200_OK)


class ModelFailed(APIException):
    status_code = status.HTTP_502_BAD_GATEWAY
    default_code = "model_failed"


def chunk(session: Session, model: str, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
    body = {
        "id": f"chatcmpl-{session.question_message.pk}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def error_event(message: str, kind: str, code: str) -> str:
    error = {"message": message, "type": kind, "param": None, "code": code}
    return f"data: {json.dumps({'error': error}, ensure_ascii=False)}\n\n"


async def _stream(session: Session, model: str) -> AsyncIterator[str]:
    """The answer's chunks, then `[DONE]` however the answer ended: an exception part way
    (the status and the first chunks are sent already) is logged and told as a last error
    event, so that the client stops reading instead of waiting on an open connection."""
    try:
        async for part in _chunks(session, model):
            yield part
    except Exception:
        log.exception("/v1 answer to message %s failed part way", session.question_message.pk)
        yield error_event(server_error_detail(), "api_error", "internal_error")
    yield "data: [DONE]\n\n"


async def _chunks(session: Session, model: str) -> AsyncIterator[str]:
    """The answer's text as it is written; a replacement that only extends what was sent is
    sent as its rest. A replacement that changes what was sent cannot be taken back in this
    protocol: the final text then comes whole in `portal_answer` on the last chunk."""
    events: list[Event] = []
    sent = ""
    yield chunk(session, model, {"role": "assistant", "content": ""})
    async for event in streamed_events(session):
        events.append(event)
        text = ""
        if isinstance(event, AnswerDelta):
            text = event.text
        elif isinstance(event, AnswerReplaced) and event.text.startswith(sent):
            text = event.text[len(sent) :]
        if text:
            sent += text
            yield chunk(session, model, {"content": text})
    result = collect(events)
    if result["error"] is not None:
        yield error_event(result["error"]["message"], "api_error", "model_failed")
    else:
        extends = result["answer"].startswith(sent)
        rest = result["answer"][len(sent) :] if extends else ""
        extra = {} if extends else {"portal_answer": result["answer"]}
        yield chunk(session, model, {"content": rest + footnotes(result["citations"])})
        yield chunk(
            session,
            model,
            {},
            "stop",
            citations=portal_citations(result["citations"]),
            conversation=result["conversation"],
            **extra,
        )

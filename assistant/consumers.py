"""/ws/chat/: ask questions and receive the answer as it is made. The protocol, also in
docs/architecture.md (Protocols) and, for the events, assistant/answering/events.py:

Client → {"type": "ask", "question", "collections": [ids] | null, "conversation": id | null},
{"type": "cancel"}, {"type": "ping"}. Server → started, strategy, rewrite, plan, step.start,
step.result, retrieval, answer.delta, answer.replace, citations, attachments, done, error.
One answer at a time per socket; a second "ask" while one runs gets an `error` (busy).
Close code 4401: not logged in, or no longer: the user was deactivated or the API token the
socket was opened with was revoked (an `error` with code `access_revoked` comes first). Losing
access to one of the collections an answer reads cancels that answer with `access_revoked`
and the socket stays open. Everything else is an `error` event and the socket stays open,
also while the database or Redis is unreachable (`unavailable`). Messages are in the visitor's
language (the language cookie, else Accept-Language), as on the pages.

Revocation (knowledge/revocation.py) without a channel layer: each `ask` and, while an answer
streams, the next event at most every CHECK_EVERY seconds read the user's access generation
(one Redis GET); only when it moved, or every GROUP_REFRESH seconds anyway, is the database
asked whether the user, the token and the answer's collections are still allowed.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncGenerator, Callable, Iterator
from contextlib import aclosing
from typing import Any, Literal, cast

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest
from django.utils import translation
from django.utils.translation import gettext as _
from redis.exceptions import RedisError

from assistant.answering.bridge import events_in_thread
from assistant.answering.events import Event, Failed
from assistant.answering.pipeline import failure, run
from assistant.answering.session import AskError, Session, start, started
from common import jsonlimits
from knowledge.models import Collection
from knowledge.revocation import generation_at_connect, read_generation, still_signed_in
from portal.limits import allow_question
from portal.typing import AnyUser

log = logging.getLogger(__name__)
# A server restarting or unreachable: the question can be asked again once it is back.
UNAVAILABLE = (DatabaseError, RedisError)


# While an answer streams, the access generation is read at most this often (seconds).
CHECK_EVERY = 0.5
Verdict = Literal["signed_out", "collection"] | None


def unavailable_message() -> str:
    return _("The portal cannot reach its database or Redis just now; ask again in a moment.")


def revoked_message(verdict: Verdict) -> str:
    if verdict == "signed_out":
        return _("Your access was revoked: this connection is closed. Sign in or use a valid API token.")
    return _("You no longer have access to a collection this answer was reading; the answer was stopped.")


class SignedOutError(Exception):
    """The socket's user was deactivated or its API token revoked."""


def access_now(user_id: int, token_id: int | None, collection_ids: set[int]) -> tuple[Verdict, AnyUser | None]:
    """What was taken away, if anything, and the user as the database has them now."""
    user = still_signed_in(user_id, token_id)
    if user is None:
        return "signed_out", None
    if collection_ids and Collection.objects.visible_to(user).filter(pk__in=collection_ids).count() < len(
        collection_ids
    ):
        return "collection", user
    return None, user


class ChatConsumer(AsyncJsonWebsocketConsumer):
    # No channel layer: nothing is sent to a chat socket from elsewhere, and a socket that
    # listens on one is closed (1011) whenever Redis restarts, answer or not.
    channel_layer_alias = "none"
    answering: asyncio.Task[None] | None = None
    cancel: threading.Event | None = None
    # From `ask` until the answer's last event is sent; the task may still be tidying up
    # after that, but the client may already ask again.
    busy = False
    # The access generation the last database check saw (None: unknown, check again), when
    # that check ran, and when the generation was last read (time.monotonic()).
    seen: int | None = None
    checked_at = 0.0
    read_at = 0.0

    async def connect(self) -> None:
        await self.accept()  # then close with a code the client can read (see CollectionEventsConsumer)
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.user = user
        self.token_id: int | None = self.scope.get("token_id")
        self.language = _language(self.scope)
        self.seen = await generation_at_connect(self.scope, user.pk)
        self.checked_at = self.read_at = time.monotonic()

    async def disconnect(self, code: int) -> None:
        if self.cancel is not None:
            self.cancel.set()  # the answer stops at its next step; what was said is kept

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        try:
            content = jsonlimits.loads(text_data or "")  # 100,000 `[`: invalid, not a RecursionError
        except ValueError:
            await self._error("invalid", _("Messages must be JSON objects."))
            return
        await self.receive_json(content)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        with translation.override(self.language):
            await self._receive(content)

    async def _receive(self, content: Any) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "ask":
            await self._ask(content)
        elif kind == "cancel":
            if self.cancel is not None:
                self.cancel.set()
        elif kind == "ping":
            await self.send_json({"type": "pong"})
        else:
            await self._error("invalid", _("Unknown message type; send ask, cancel or ping."))

    async def _ask(self, content: dict[str, Any]) -> None:
        if self.busy:
            await self._error("busy", _("An answer is still being written; wait for it or cancel it."))
            return
        question, collections, conversation = (
            content.get("question"),
            content.get("collections"),
            content.get("conversation"),
        )
        if not isinstance(question, str) or not _ids_or_none(collections) or not _id_or_none(conversation):
            await self._error(
                "invalid",
                _("Send a question (text), collections (a list of ids or null) and conversation (an id or null)."),
            )
            return
        try:
            await self._signed_in()
            session = await self._start(question, collections, conversation)
        except SignedOutError:
            await self._revoked("signed_out")
            return
        except AskError as exc:
            await self._error(exc.code, exc.message)
            return
        except UNAVAILABLE:
            log.warning("Question refused: the database or Redis is unreachable", exc_info=True)
            await self._error("unavailable", unavailable_message())
            return
        self.busy = True
        await self.send_json(started(session).to_json())
        self.cancel = threading.Event()
        self.answering = asyncio.ensure_future(self._stream(session, self.cancel))

    async def _signed_in(self) -> None:
        """Raises SignedOutError when the user or the socket's token lost access since the last check."""
        if await self._access_taken() == "signed_out":
            raise SignedOutError

    async def _access_taken(self, session: Session | None = None, *, throttle: bool = False) -> Verdict:
        """What was taken away since the last check: the database is asked only when the
        access generation moved (or cannot be read), or GROUP_REFRESH seconds after it was
        last asked. With a `session`, its collections are checked too. With `throttle`, the
        generation is read at most every CHECK_EVERY seconds."""
        now = time.monotonic()
        if throttle and now - self.read_at < CHECK_EVERY:
            return None
        self.read_at = now
        current = await read_generation(self.user.pk)
        if current is not None and current == self.seen and now - self.checked_at < settings.GROUP_REFRESH:
            return None
        # The collections the answer reads: those of its scope's versions (loaded, no query).
        collection_ids = {version.collection_id for version in session.scope.versions} if session else set()
        verdict, user = await database_sync_to_async(access_now, thread_sensitive=False)(
            self.user.pk, self.token_id, collection_ids
        )
        if user is not None:
            self.user = user
        if verdict is None:
            self.seen, self.checked_at = current, now
        return verdict

    async def _revoked(self, verdict: Verdict) -> None:
        """Tell the client why, and close the socket when the user or token is no longer valid."""
        self.busy = False
        with translation.override(self.language):  # also from the answer's task
            await self._error("access_revoked", revoked_message(verdict))
        if verdict == "signed_out":
            await self.close(code=4401)

    async def _start(self, question: str, collections: list[int] | None, conversation: int | None) -> Session:
        # Not thread-sensitive: one socket's question does not wait for another's.
        if not await database_sync_to_async(allow_question, thread_sensitive=False)(self.user.pk):
            raise AskError("rate_limited", _("Too many questions in a minute; wait a little and ask again."))
        session: Session = await database_sync_to_async(start, thread_sensitive=False)(
            self.user, question, collection_ids=collections, conversation_id=conversation
        )
        return session

    async def _stream(self, session: Session, cancel: threading.Event) -> None:
        language = self.language

        def events(cancelled: Callable[[], bool]) -> Iterator[Event]:
            with translation.override(language):  # in the answer's own thread
                yield from run(session, cancelled=cancelled)

        try:
            # An async generator: closed on leaving, so an early return waits for its thread.
            answer = cast(AsyncGenerator[Event, None], events_in_thread(events, cancel))
            async with aclosing(answer) as stream:
                async for event in stream:
                    verdict = await self._access_taken(session, throttle=True)
                    if verdict is not None:  # nothing more of this answer goes out
                        cancel.set()
                        await self._revoked(verdict)
                        return  # leaving `aclosing` waits for the answer's thread to stop
                    if event.type in ("done", "error"):
                        self.busy = False  # before it is sent: the client may answer it with a new ask
                    await self.send_json(event.to_json())
        except UNAVAILABLE:  # the answer could not be stored: the server went away meanwhile
            log.warning("Answer stream failed: the database or Redis is unreachable", exc_info=True)
            self.busy = False
            await self._error("unavailable", unavailable_message())
        except Exception as exc:
            self.busy = False
            await self.send_json(failure(exc)[1].to_json())
        finally:
            self.busy = False

    async def _error(self, code: str, message: str) -> None:
        await self.send_json(Failed(code, message).to_json())


def _language(scope: dict[str, Any]) -> str:
    """The language a page would be shown in: the language cookie, else Accept-Language."""
    request = HttpRequest()
    request.COOKIES = dict(scope.get("cookies") or {})
    headers = dict(scope.get("headers") or [])
    request.META["HTTP_ACCEPT_LANGUAGE"] = headers.get(b"accept-language", b"").decode("latin-1")
    return translation.get_language_from_request(request)


def _ids_or_none(value: object) -> bool:
    return value is None or (isinstance(value, list) and all(_id_or_none(item) and item is not None for item in value))


def _id_or_none(value: object) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0)

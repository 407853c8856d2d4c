"""Taking access away reaches open websockets at once (knowledge/revocation.py): a removed
member, a deleted collection, a revoked token or a deactivated user gets no further event
and the socket is closed (4404 for what is no longer visible, 4401 for a user or token no
longer valid), within seconds and whether or not anything is being sent. Through a real
daphne, Redis and websocket client; the in-process tests below check the socket's own
check when the announcement was lost."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest
import redis
import websockets
from channels.db import database_sync_to_async
from channels.layers import channel_layers, get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import connections

from assistant.answering import prompts
from knowledge import actions
from knowledge.events import collection_group, send_collection_event
from knowledge.models import Membership, Role
from knowledge.revocation import PREFIX, access_changed
from portal.routing import websocket_urlpatterns
from portal.supervisor import web_command
from tests.assistant.chat_files import ingest_files
from tests.conftest import set_role
from tests.portal.test_stack import _session_cookie
from tests.providers.wire import Reply, chunks, completion, serve
from tests.stack import free_port, http_ok, process, wait_for

pytestmark = pytest.mark.usefixtures("media")
SOON = 5.0  # seconds within which a socket that lost access must be closed


class Socket:
    """A websocket client in a thread of its own, so that the test's thread can act on the
    database meanwhile: what it received, and how and when it was closed."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.events: list[dict[str, Any]] = []
        self.code: int | None = None
        self.closed_at: float | None = None
        self.closed = threading.Event()
        self.open = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.ws: Any = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run(url, headers)), daemon=True)
        self.thread.start()
        assert self.open.wait(15), "the socket did not open"

    async def _run(self, url: str, headers: dict[str, str]) -> None:
        try:
            async with websockets.connect(url, additional_headers=headers) as ws:
                self.loop, self.ws = asyncio.get_running_loop(), ws
                self.open.set()
                try:
                    async for raw in ws:
                        self.events.append(json.loads(raw))
                except websockets.ConnectionClosed:
                    pass
                self.code = ws.close_code
        finally:
            self.closed_at = time.monotonic()
            self.open.set()
            self.closed.set()

    def send(self, message: dict[str, Any]) -> None:
        assert self.loop is not None
        asyncio.run_coroutine_threadsafe(self.ws.send(json.dumps(message)), self.loop).result(5)

    def close(self) -> None:
        if self.loop is not None and not self.closed.is_set():
            asyncio.run_coroutine_threadsafe(self.ws.close(), self.loop).result(5)
        self.thread.join(5)

    def wait(self, predicate: Any, timeout: float = 10) -> bool:
        """True once `predicate(events)` holds; fails with the events seen after `timeout`."""
        return bool(wait_for(lambda: predicate(self.events), timeout, f"the event awaited ({self.events})", every=0.05))

    def types(self) -> list[str]:
        return [event["type"] for event in self.events]


def subscribed(events: list[dict[str, Any]]) -> bool:
    return any(event["type"] == "subscribed" for event in events)


def watch(port: int, collection_id: int, headers: dict[str, str]) -> Socket:
    socket = Socket(f"ws://127.0.0.1:{port}/ws/collections/{collection_id}/", headers)
    assert socket.wait(subscribed), socket.events
    return socket


def session(port: int, user) -> dict[str, str]:
    return {"Cookie": _session_cookie(user), "Origin": f"http://127.0.0.1:{port}"}


def token(user) -> tuple[Any, dict[str, str]]:
    created, key = actions.do_create_token(user, "tests")
    return created, {"Authorization": f"Token {key}"}


def closed_soon(socket: Socket, since: float) -> float:
    """Seconds from `since` until the socket closed; fails when it stays open past SOON."""
    assert socket.closed.wait(SOON), f"still open {SOON} s after access was taken away: {socket.events}"
    assert socket.closed_at is not None
    return socket.closed_at - since


EVENT = {"type": "document.ready", "document": 7, "pages": 3}


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_a_removed_member_gets_no_further_event_and_is_closed(live_web, alice, bob, team, team_collection):
    alices = watch(live_web, team_collection.pk, session(live_web, alice))
    bobs = watch(live_web, team_collection.pk, session(live_web, bob))
    try:
        removed = time.monotonic()
        actions.do_remove_member(Membership.objects.get(team=team, user=bob))
        send_collection_event(team_collection.pk, EVENT)  # races the announcement: must not reach bob
        assert closed_soon(bobs, removed) < SOON
        assert bobs.code == 4404
        assert bobs.types() == ["subscribed"]
        assert alices.wait(lambda events: EVENT in events)
        assert not alices.closed.is_set()
    finally:
        alices.close()
        bobs.close()


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_an_idle_socket_is_closed_when_access_goes_without_any_event(live_web, alice, bob, team, team_collection):
    bobs = watch(live_web, team_collection.pk, session(live_web, bob))
    try:
        removed = time.monotonic()
        actions.do_remove_member(Membership.objects.get(team=team, user=bob))
        assert closed_soon(bobs, removed) < SOON  # the push: GROUP_REFRESH is a minute
        assert bobs.code == 4404
        assert bobs.types() == ["subscribed"]
    finally:
        bobs.close()


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_a_lowered_role_still_reads_so_the_socket_stays(live_web, alice, bob, team, team_collection):
    set_role(team, bob, Role.EDITOR)
    bobs = watch(live_web, team_collection.pk, session(live_web, bob))
    try:
        actions.do_change_role(Membership.objects.get(team=team, user=bob), Role.VIEWER)
        # The announcement reached bob's channel first, and a socket handles its messages one
        # after the other: the event arrives only once the access check has passed.
        send_collection_event(team_collection.pk, EVENT)
        assert bobs.wait(lambda events: EVENT in events), bobs.events
        assert not bobs.closed.is_set()
    finally:
        bobs.close()


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_a_socket_opened_with_a_revoked_token_is_closed_and_a_session_one_stays(
    live_web, alice, bob, team, team_collection
):
    bobs_token, by_token = token(bob)
    with_token = watch(live_web, team_collection.pk, by_token)
    by_session = watch(live_web, team_collection.pk, session(live_web, bob))
    try:
        revoked = time.monotonic()
        actions.do_revoke_token(bobs_token)
        assert closed_soon(with_token, revoked) < SOON
        assert with_token.code == 4401
        send_collection_event(team_collection.pk, EVENT)
        assert by_session.wait(lambda events: EVENT in events)  # bob himself may still read
        assert with_token.types() == ["subscribed"]
        assert not by_session.closed.is_set()
    finally:
        with_token.close()
        by_session.close()


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_a_deactivated_user_is_closed(live_web, alice, bob, team, team_collection):
    bobs = watch(live_web, team_collection.pk, session(live_web, bob))
    try:
        bob.is_active = False
        bob.save(update_fields=["is_active"])
        deactivated = time.monotonic()
        access_changed([bob.pk])  # the announcement a deactivation makes
        assert closed_soon(bobs, deactivated) < SOON
        assert bobs.code == 4401
    finally:
        bobs.close()


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_watchers_of_a_deleted_collection_are_closed(live_web, alice, bob, team, team_collection):
    alices = watch(live_web, team_collection.pk, session(live_web, alice))
    bobs = watch(live_web, team_collection.pk, session(live_web, bob))
    try:
        deleted = time.monotonic()
        actions.do_delete_collection(team_collection)
        for socket in (alices, bobs):
            assert closed_soon(socket, deleted) < SOON
            assert socket.code == 4404
    finally:
        alices.close()
        bobs.close()


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_a_chat_socket_whose_token_was_revoked_refuses_the_next_question(live_web, bob, team, team_collection):
    bobs_token, by_token = token(bob)
    chat = Socket(f"ws://127.0.0.1:{live_web}/ws/chat/", by_token)
    try:
        chat.send({"type": "ping"})
        assert chat.wait(lambda events: {"type": "pong"} in events)
        actions.do_revoke_token(bobs_token)
        chat.send({"type": "ask", "question": "What is in the handbook?", "collections": [team_collection.pk]})
        assert chat.closed.wait(10)
        assert chat.code == 4401
        assert [(event["type"], event.get("code")) for event in chat.events] == [
            ("pong", None),
            ("error", "access_revoked"),
        ]
        assert not bob.conversations.exists()  # the question was not recorded
    finally:
        chat.close()


# A chat answer that is revoked while it streams.

LEAVE = "# Annual leave\n\nUnused annual leave carries over to the next year, five days at most.\n"


def scripted(path: str, body: Any) -> Reply:
    """Fixed replies to the calls before the answer (route, rewrite, plan); the answer itself
    streams slowly (about 10 s), so that access can be taken away while it is written."""
    system = body["messages"][0]["content"]
    if body.get("stream"):
        return Reply(body=chunks(*(["Leave carries over. "] * 200)), pace=0.05)
    if any(system.startswith(text[:12]) for text in prompts.ROUTER.values()):
        return Reply(body=completion('{"strategy": "direct", "reason": "clear"}'))
    return Reply(body=completion("How much annual leave carries over?"))


@pytest.fixture
def chat_web(tmp_path):
    with serve() as wire:
        wire.responder = scripted
        port = free_port()
        log = tmp_path / "daphne.log"
        env = {"PROVIDER_CHAT": "openai", "BASE_URL_CHAT": f"{wire.url}/v1", "API_KEY_CHAT": "sk-test"}
        with process(web_command("127.0.0.1", port), log, **env) as proc:
            wait_for(lambda: http_ok(f"http://127.0.0.1:{port}/healthz") or proc.poll() is not None, 60, "daphne", log)
            assert proc.poll() is None, log.read_text()
            yield port


def ask_while_streaming(port: int, headers: dict[str, str], collection_id: int, take_away: Any) -> Socket:
    """Ask a long answer; after a few parts, `take_away()`; the socket once the answer ended."""
    chat = Socket(f"ws://127.0.0.1:{port}/ws/chat/", headers)
    question = "How much annual leave carries over? long answer please"
    chat.send({"type": "ask", "question": question, "collections": [collection_id]})
    assert chat.wait(lambda events: chat.types().count("answer.delta") >= 3, 60), chat.events
    take_away()
    assert chat.wait(lambda events: events[-1]["type"] in ("done", "error"), SOON), chat.types()
    return chat


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_a_streaming_answer_stops_when_the_token_is_revoked_and_the_socket_closes(
    chat_web, alice, bob, team, team_collection
):
    ingest_files(team_collection, {"leave.md": LEAVE.encode()})
    bobs_token, by_token = token(bob)
    chat = ask_while_streaming(chat_web, by_token, team_collection.pk, lambda: actions.do_revoke_token(bobs_token))
    try:
        assert chat.events[-1]["code"] == "access_revoked"
        assert chat.closed.wait(SOON)
        assert chat.code == 4401
        assert "done" not in chat.types()
        assert chat.types().count("answer.delta") < 100  # 200 were coming
    finally:
        chat.close()


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_a_streaming_answer_stops_when_its_collection_is_taken_away_and_the_socket_stays(
    chat_web, alice, bob, team, team_collection
):
    ingest_files(team_collection, {"leave.md": LEAVE.encode()})
    membership = Membership.objects.get(team=team, user=bob)
    chat = ask_while_streaming(
        chat_web, session(chat_web, bob), team_collection.pk, lambda: actions.do_remove_member(membership)
    )
    try:
        assert chat.events[-1]["code"] == "access_revoked"
        assert "done" not in chat.types()
        count = len(chat.events)
        assert not chat.closed.is_set()
        chat.send({"type": "ask", "question": "And now?", "collections": [team_collection.pk]})
        assert chat.wait(lambda events: len(events) > count)
        # Nothing more of that answer came before the reply to the next question.
        assert [(e["type"], e.get("code")) for e in chat.events[count:]] == [("error", "not_found")]
        assert not chat.closed.is_set()
    finally:
        chat.close()


# In process: the socket's own check, when the announcement never came.


@pytest.fixture
def short_groups(settings):
    settings.GROUP_REFRESH = 0.5
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


async def _subscribe(user, collection_id: int) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/collections/{collection_id}/")
    socket.scope["user"] = user  # no middleware: the consumer reads the generation itself
    connected, _ = await socket.connect()
    assert connected
    assert (await socket.receive_json_from(5))["type"] == "subscribed"
    return socket


def _bump(user_id: int) -> None:
    """What an action does on commit, minus the push (as when Redis lost that message)."""
    redis.Redis.from_url(settings.REDIS_URL).incr(f"{PREFIX}:{user_id}")


@pytest.mark.django_db(transaction=True)
def test_a_moved_generation_makes_the_socket_check_before_forwarding(bob, team, team_collection):
    group = collection_group(team_collection.pk)

    async def scenario() -> tuple[dict, dict]:
        socket = await _subscribe(bob, team_collection.pk)
        layer = get_channel_layer()
        try:
            # The membership goes without any announcement: the generation has not moved, so
            # the socket does not ask the database (the renewal's check is a minute away).
            await database_sync_to_async(Membership.objects.filter(team=team, user=bob).delete)()
            await layer.group_send(group, {"type": "collection.event", "event": {"type": "test.event", "n": 1}})
            forwarded = await socket.receive_json_from(5)
            # Now the generation moves but the push is lost: the next event is checked first.
            await database_sync_to_async(_bump)(bob.pk)
            await layer.group_send(group, {"type": "collection.event", "event": {"type": "test.event", "n": 2}})
            output = await socket.receive_output(5)
            assert await socket.receive_nothing(0.5)
            return forwarded, output
        finally:
            await socket.disconnect()
            await database_sync_to_async(connections.close_all)()

    forwarded, output = asyncio.run(scenario())
    assert forwarded == {"type": "test.event", "n": 1}
    assert output == {"type": "websocket.close", "code": 4404}


@pytest.mark.django_db(transaction=True)
def test_the_group_renewal_checks_by_itself_and_stops_renewing(short_groups, bob, team, team_collection):
    group = collection_group(team_collection.pk)

    async def scenario() -> tuple[dict, list[str]]:
        socket = await _subscribe(bob, team_collection.pk)
        layer = get_channel_layer()
        try:
            await database_sync_to_async(Membership.objects.filter(team=team, user=bob).delete)()
            output = await socket.receive_output(3)  # no event, no announcement: the renewal's check
            connection = layer.connection(layer.consistent_hash(group))
            members = [name.decode() for name in await connection.zrange(layer._group_key(group), 0, -1)]
            return output, members
        finally:
            await socket.disconnect()
            await database_sync_to_async(connections.close_all)()

    output, members = asyncio.run(scenario())
    assert output == {"type": "websocket.close", "code": 4404}
    assert members == []  # it left the group and was not added again

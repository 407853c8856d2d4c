"""The isolation matrix's websockets (tests/test_isolation.py holds the HTTP routes): on a
real daphne process, 4401 for an anonymous caller and 4404 for a collection the caller
cannot see; a chat question about such a collection is answered `not_found`."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from typing import Any

import pytest
import websockets

from ingestion.index import ensure_active_version
from knowledge import actions
from providers import registry


def _socket_outcome(url: str, headers: dict[str, str], ask_about: int | None = None) -> Any:
    """'subscribed', the close code, or (chat) the code of the error event after asking."""

    async def scenario() -> Any:
        try:
            async with websockets.connect(url, additional_headers=headers) as ws:
                if ask_about is not None:
                    question = {"type": "ask", "question": "Alice's notes?", "collections": [ask_about]}
                    await ws.send(json.dumps(question))
                event = json.loads(await asyncio.wait_for(ws.recv(), timeout=10))
                return event.get("code") if event["type"] == "error" else event["type"]
        except websockets.ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None

    return asyncio.run(scenario())


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_a_websocket_lets_in_only_callers_who_may_see_the_collection(
    live_web, alice, bob, charlie, team, private_collection, team_collection
):
    keys = {
        user.username: {"Authorization": f"Token {actions.do_create_token(user, 'tests')[1]}"}
        for user in (alice, bob, charlie)
    }
    base = f"ws://127.0.0.1:{live_web}/ws"
    private, shared = f"{base}/collections/{private_collection.pk}/", f"{base}/collections/{team_collection.pk}/"
    outcomes = {
        "anonymous collection": _socket_outcome(private, {}),
        "anonymous chat": _socket_outcome(f"{base}/chat/", {}, ask_about=private_collection.pk),
        "alice private": _socket_outcome(private, keys["alice"]),
        "charlie private": _socket_outcome(private, keys["charlie"]),
        "charlie team": _socket_outcome(shared, keys["charlie"]),
        "bob private": _socket_outcome(private, keys["bob"]),
        "bob team": _socket_outcome(shared, keys["bob"]),
        "charlie asks about private": _socket_outcome(f"{base}/chat/", keys["charlie"], private_collection.pk),
        "bob asks about private": _socket_outcome(f"{base}/chat/", keys["bob"], private_collection.pk),
    }
    assert outcomes == {
        "anonymous collection": 4401,
        "anonymous chat": 4401,
        "alice private": "subscribed",
        "charlie private": 4404,
        "charlie team": 4404,
        "bob private": 4404,
        "bob team": "subscribed",
        "charlie asks about private": "not_found",
        "bob asks about private": "not_found",
    }


def _chat_started(url: str, headers: dict[str, str]) -> Any:
    """The collections a question naming none searches: its `started` event's."""

    async def scenario() -> Any:
        async with websockets.connect(url, additional_headers=headers) as ws:
            await ws.send(json.dumps({"type": "ask", "question": "What do the notes say?"}))
            while True:
                event = json.loads(await asyncio.wait_for(ws.recv(), timeout=30))
                if event["type"] in ("started", "error"):
                    return event

    return asyncio.run(scenario())


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_a_websocket_keeps_a_limited_token_to_its_collections(live_web, alice, private_collection, team_collection):
    """alice's token limited to her team's collection: her private one does not exist on
    either socket, and a question naming no collection searches the team's alone."""
    for collection in (private_collection, team_collection):  # searchable: an index version each
        ensure_active_version(collection, registry.text_embedder())
    _token, key = actions.do_create_token(alice, "limited", collections=[team_collection])
    headers = {"Authorization": f"Token {key}"}
    base = f"ws://127.0.0.1:{live_web}/ws"
    outcomes = {
        "private": _socket_outcome(f"{base}/collections/{private_collection.pk}/", headers),
        "shared": _socket_outcome(f"{base}/collections/{team_collection.pk}/", headers),
        "asks about private": _socket_outcome(f"{base}/chat/", headers, private_collection.pk),
    }
    assert outcomes == {"private": 4404, "shared": "subscribed", "asks about private": "not_found"}
    started = _chat_started(f"{base}/chat/", headers)
    assert started["type"] == "started", started
    assert [collection["id"] for collection in started["collections"]] == [team_collection.pk]
    unlimited = {"Authorization": f"Token {actions.do_create_token(alice, 'all')[1]}"}
    searched = {collection["id"] for collection in _chat_started(f"{base}/chat/", unlimited)["collections"]}
    assert searched == {private_collection.pk, team_collection.pk}


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_a_websocket_on_another_host_name_is_refused(live_web, alice, team_collection):
    """The Host header must be one of ALLOWED_HOSTS, as for HTTP: a page on a name that
    resolves to the portal (DNS rebinding) opens no socket, even with a valid token."""
    key = actions.do_create_token(alice, "tests")[1]

    async def handshake(host: str) -> int:
        """The status of a websocket handshake naming `host` (101: opened)."""
        reader, writer = await asyncio.open_connection("127.0.0.1", live_web)
        request = (
            f"GET /ws/collections/{team_collection.pk}/ HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}\r\n"
            f"Sec-WebSocket-Version: 13\r\nAuthorization: Token {key}\r\n\r\n"
        )
        writer.write(request.encode())
        status = int((await asyncio.wait_for(reader.readline(), timeout=10)).split()[1])
        writer.close()
        return status

    assert asyncio.run(handshake("attacker.example")) == 403
    assert asyncio.run(handshake(f"attacker.example:{live_web}")) == 403
    assert asyncio.run(handshake(f"127.0.0.1:{live_web}")) == 101
    assert asyncio.run(handshake(f"localhost:{live_web}")) == 101

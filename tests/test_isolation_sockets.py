"""The isolation matrix's websockets (tests/test_isolation.py holds the HTTP routes): on a
real daphne process, 4401 for an anonymous caller and 4404 for a collection the caller
cannot see; a chat question about such a collection is answered `not_found`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import websockets

from knowledge import actions


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

"""A Celery task through a real worker and websocket round trips through real daphne."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets
from django.test import Client

from knowledge.events import send_collection_event
from portal.tasks import heartbeat
from tests.conftest import token_for

# Idle longer than redis-py's 5 s read timeout and channels_redis's 5 s blocking wait, which
# once raced: the socket must outlive both.
IDLE = 7

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True)]


def test_it_runs_a_task_through_a_real_worker(live_worker):
    result = heartbeat.delay()
    stamp = result.get(timeout=30)
    assert isinstance(stamp, float)
    assert stamp > 0
    assert result.successful()


def test_it_reports_the_worker_in_healthz(live_worker, live_web):
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{live_web}/healthz", timeout=10) as response:
        body = json.loads(response.read())
    assert body["ok"] is True
    assert body["database"]["ok"]
    assert "pgvector" in body["database"]["detail"]
    assert body["redis"]["ok"]
    assert body["worker"]["ok"]


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


async def _receive(ws) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout=10))


def test_it_streams_collection_events_over_a_real_websocket(live_web, alice, private_collection):
    url = f"ws://127.0.0.1:{live_web}/ws/collections/{private_collection.pk}/"
    headers = {"Cookie": _session_cookie(alice), "Origin": f"http://127.0.0.1:{live_web}"}

    async def scenario() -> list[dict]:
        async with websockets.connect(url, additional_headers=headers) as ws:
            hello = await _receive(ws)
            await ws.send(json.dumps({"type": "ping"}))
            pong = await _receive(ws)
            # Sent from this process through the Redis channel layer, as a worker would.
            await asyncio.to_thread(send_collection_event, private_collection.pk, {"type": "test.event", "n": 1})
            event = await _receive(ws)
            return [hello, pong, event]

    hello, pong, event = asyncio.run(scenario())
    assert hello == {"type": "subscribed", "collection": private_collection.pk}
    assert pong == {"type": "pong"}
    assert event == {"type": "test.event", "n": 1}


def test_it_accepts_an_api_token_on_the_websocket(live_web, api, alice, private_collection):
    key = token_for(api, alice)
    url = f"ws://127.0.0.1:{live_web}/ws/collections/{private_collection.pk}/"

    async def scenario() -> dict:
        async with websockets.connect(url, additional_headers={"Authorization": f"Token {key}"}) as ws:
            return await _receive(ws)

    assert asyncio.run(scenario())["type"] == "subscribed"


def _close_code(url: str, headers: dict[str, str]) -> int | None:
    async def scenario() -> int | None:
        async with websockets.connect(url, additional_headers=headers) as ws:
            try:
                await asyncio.wait_for(ws.recv(), timeout=10)
            except websockets.ConnectionClosed as closed:
                return closed.rcvd.code if closed.rcvd else None
        return None

    try:
        return asyncio.run(scenario())
    except websockets.InvalidStatus as refused:  # refused during the handshake
        return refused.response.status_code


def test_it_refuses_strangers_anonymous_and_foreign_origins(live_web, alice, charlie, private_collection):
    url = f"ws://127.0.0.1:{live_web}/ws/collections/{private_collection.pk}/"
    assert _close_code(url, {"Cookie": _session_cookie(charlie)}) == 4404
    assert _close_code(url, {}) == 4401
    missing = f"ws://127.0.0.1:{live_web}/ws/collections/999999/"
    assert _close_code(missing, {"Cookie": _session_cookie(alice)}) == 4404
    foreign = {"Cookie": _session_cookie(alice), "Origin": "https://evil.example"}
    assert _close_code(url, foreign) == 403


def test_an_idle_websocket_stays_open(live_web, alice, private_collection):
    # redis-py's default 5 s read timeout once raced channels_redis's 5 s blocking wait.
    url = f"ws://127.0.0.1:{live_web}/ws/collections/{private_collection.pk}/"
    headers = {"Cookie": _session_cookie(alice), "Origin": f"http://127.0.0.1:{live_web}"}

    async def scenario() -> dict:
        async with websockets.connect(url, additional_headers=headers) as ws:
            await _receive(ws)
            await asyncio.sleep(IDLE)
            await ws.send(json.dumps({"type": "ping"}))
            return await _receive(ws)

    assert asyncio.run(scenario()) == {"type": "pong"}

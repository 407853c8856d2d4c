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
from tests.portal.stack import celery_worker, daphne, free_port, http_ok, wait_for

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(tmp_path):
    log = tmp_path / "worker.log"
    with celery_worker(log) as proc:
        wait_for(lambda: b"ready." in log.read_bytes() or proc.poll() is not None, 60, "worker start", log)
        assert proc.poll() is None, log.read_text()
        yield proc


@pytest.fixture
def web(tmp_path):
    port = free_port()
    log = tmp_path / "daphne.log"
    with daphne(log, port) as proc:
        wait_for(lambda: http_ok(f"http://127.0.0.1:{port}/healthz") or proc.poll() is not None, 60, "daphne", log)
        assert proc.poll() is None, log.read_text()
        yield port


def test_it_runs_a_task_through_a_real_worker(worker):
    result = heartbeat.delay()
    stamp = result.get(timeout=30)
    assert isinstance(stamp, float)
    assert stamp > 0
    assert result.successful()


def test_it_reports_the_worker_in_healthz(worker, web):
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{web}/healthz", timeout=10) as response:
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


def test_it_streams_collection_events_over_a_real_websocket(web, alice, private_collection):
    url = f"ws://127.0.0.1:{web}/ws/collections/{private_collection.pk}/"
    headers = {"Cookie": _session_cookie(alice), "Origin": f"http://127.0.0.1:{web}"}

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


def test_it_accepts_an_api_token_on_the_websocket(web, api, alice, private_collection):
    key = token_for(api, alice)
    url = f"ws://127.0.0.1:{web}/ws/collections/{private_collection.pk}/"

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


def test_it_refuses_strangers_anonymous_and_foreign_origins(web, alice, charlie, private_collection):
    url = f"ws://127.0.0.1:{web}/ws/collections/{private_collection.pk}/"
    assert _close_code(url, {"Cookie": _session_cookie(charlie)}) == 4404
    assert _close_code(url, {}) == 4401
    missing = f"ws://127.0.0.1:{web}/ws/collections/999999/"
    assert _close_code(missing, {"Cookie": _session_cookie(alice)}) == 4404
    foreign = {"Cookie": _session_cookie(alice), "Origin": "https://evil.example"}
    assert _close_code(url, foreign) == 403

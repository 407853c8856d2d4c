"""Bad input and unexpected failures under /api/ answer JSON with the right status and a
`detail`, and store nothing: bodies nested past common.jsonlimits.MAX_DEPTH (the API's parser
and both websockets), a body over DATA_UPLOAD_MAX_MEMORY_SIZE, an exception no view
expected, a refusal raised outside DRF. Outside /api/ the same errors are HTML pages."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
import websockets
from django.test import Client

from assistant.models import Conversation, Message
from common.jsonlimits import MAX_DEPTH
from knowledge.models import Collection, Team
from quality.models import Feedback, GoldenQuestion
from tests.conftest import token_for
from tests.hardening.error_urls import SECRET

DEEP_ARRAYS = "[" * 100_000
DEEP_OBJECTS = '{"a":' * 100_000
TOO_DEEP = f"more than {MAX_DEPTH} levels deep"


def assert_json_error(response, status: int) -> str:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json"
    detail = response.json()["detail"]
    assert isinstance(detail, str)
    assert detail
    return detail


def nested(depth: int) -> str:
    """A collection whose description is arrays `depth` levels deep, inside the body's object."""
    return '{"name": "Deep", "description": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


@pytest.mark.parametrize("body", [DEEP_ARRAYS, DEEP_OBJECTS], ids=["arrays", "objects"])
@pytest.mark.parametrize("url", ["/api/collections/", "/api/search/", "/api/teams/", "/api/ask/"])
def test_it_refuses_deeply_nested_bodies_with_a_json_400(api, alice, url, body):
    token_for(api, alice)
    response = api.post(url, body, content_type="application/json")
    assert TOO_DEEP in assert_json_error(response, 400)
    assert not Collection.objects.exists()
    assert not Team.objects.exists()
    assert not Conversation.objects.exists()


def test_it_reads_a_body_exactly_at_the_limit_and_refuses_one_level_more(api, alice):
    token_for(api, alice)
    at_limit = api.post("/api/collections/", nested(MAX_DEPTH), content_type="application/json")
    assert at_limit.status_code == 400
    assert "description" in at_limit.json()  # parsed, then refused by the serializer
    over = api.post("/api/collections/", nested(MAX_DEPTH + 1), content_type="application/json")
    assert TOO_DEEP in assert_json_error(over, 400)
    assert not Collection.objects.exists()
    assert api.post("/api/collections/", {"name": "Shallow"}, format="json").status_code == 201


def test_it_still_names_a_malformed_body_as_drf_does(api, alice):
    token_for(api, alice)
    response = api.post("/api/collections/", '{"name": "unterminated', content_type="application/json")
    assert assert_json_error(response, 400).startswith("JSON parse error - ")
    assert not Collection.objects.exists()


def test_the_event_stream_ask_refuses_a_deep_body_with_an_error_event(api, alice):
    token_for(api, alice)
    response = api.post("/api/ask/", DEEP_ARRAYS, content_type="application/json", HTTP_ACCEPT="text/event-stream")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/event-stream")
    event, data = response.content.decode().strip().split("\n")
    assert event == "event: error"
    assert TOO_DEEP in json.loads(data.removeprefix("data: "))["message"]
    assert not Conversation.objects.exists()


def test_a_view_with_its_own_parser_list_refuses_a_deep_body(api, alice, private_collection):
    conversation = Conversation.objects.create(user=alice, title="q")
    answer = Message.objects.create(conversation=conversation, role="assistant", content="It is 1.5.")
    feedback = Feedback.objects.create(message=answer, user=alice, rating="down", question="How far?")
    feedback.collections.add(private_collection)
    token_for(api, alice)
    response = api.post(f"/api/feedback/{feedback.pk}/golden/", DEEP_OBJECTS, content_type="application/json")
    assert TOO_DEEP in assert_json_error(response, 400)
    assert not GoldenQuestion.objects.exists()


def test_a_body_over_the_upload_memory_limit_is_a_json_400(api, alice):
    token_for(api, alice)
    body = json.dumps({"name": "Big", "description": "x" * (12 * 1024 * 1024)})
    response = api.post("/api/collections/", body, content_type="application/json")
    assert "2.5\xa0MB" in assert_json_error(response, 400)
    assert not Collection.objects.exists()


def test_a_body_over_the_limit_outside_the_api_is_the_html_page(client):
    response = client.post("/accounts/login/", {"login": "a@example.com", "password": "x" * (12 * 1024 * 1024)})
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")


def test_a_path_no_route_matches_is_a_json_404_under_the_api_only(api, alice, client):
    token_for(api, alice)
    assert assert_json_error(api.get("/api/no-such-thing/"), 404)
    assert client.get("/no-such-thing/")["Content-Type"].startswith("text/html")


@pytest.mark.urls("tests.hardening.error_urls")
@pytest.mark.parametrize("url", ["/api/test-failing/drf/", "/api/test-failing/plain/"], ids=["drf", "django"])
def test_an_unexpected_error_under_the_api_is_a_json_500_logged_once_with_its_traceback(url, caplog, settings):
    assert settings.DEBUG is False
    client = Client(raise_request_exception=False)
    with caplog.at_level(logging.ERROR, logger="django.request"):
        response = client.get(url)
    detail = assert_json_error(response, 500)
    assert "logged" in detail
    assert SECRET not in response.content.decode()
    logged = [record for record in caplog.records if record.name == "django.request" and record.levelname == "ERROR"]
    assert len(logged) == 1
    assert logged[0].exc_info is not None
    assert logged[0].exc_info[1] is not None
    assert SECRET in str(logged[0].exc_info[1])


@pytest.mark.urls("tests.hardening.error_urls")
def test_an_unexpected_error_outside_the_api_is_the_html_500_page():
    response = Client(raise_request_exception=False).get("/test-failing/")
    assert response.status_code == 500
    assert response["Content-Type"].startswith("text/html")
    assert b"Server Error (500)" in response.content
    assert SECRET.encode() not in response.content


@pytest.mark.urls("tests.hardening.error_urls")
def test_a_refusal_raised_outside_drf_is_a_json_403_under_the_api_and_html_elsewhere(client):
    detail = assert_json_error(client.get("/api/test-refusing/"), 403)
    assert SECRET not in detail
    page = client.get("/test-refusing/")
    assert page.status_code == 403
    assert page["Content-Type"].startswith("text/html")


# Websockets, through a real daphne


def send_then_ping(url: str, key: str, message: str) -> list[dict]:
    """The replies to `message` (if any) and to a ping after it, on one socket."""

    async def scenario() -> list[dict]:
        async with websockets.connect(url, additional_headers={"Authorization": f"Token {key}"}) as ws:
            await ws.send(message)
            await ws.send(json.dumps({"type": "ping"}))
            replies: list[dict] = []
            while not replies or replies[-1].get("type") != "pong":
                replies.append(json.loads(await asyncio.wait_for(ws.recv(), timeout=10)))
            return replies

    return asyncio.run(scenario())


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)  # daphne sees the rows
def test_a_deep_websocket_message_gets_the_usual_answer_and_the_socket_stays_open(
    live_web, api, alice, private_collection
):
    key = token_for(api, alice)
    chat = send_then_ping(f"ws://127.0.0.1:{live_web}/ws/chat/", key, DEEP_ARRAYS)
    assert chat[0] == {**chat[0], "type": "error", "code": "invalid"}
    assert chat[1:] == [{"type": "pong"}]
    collection = f"ws://127.0.0.1:{live_web}/ws/collections/{private_collection.pk}/"
    events = send_then_ping(collection, key, DEEP_OBJECTS)
    assert events == [{"type": "subscribed", "collection": private_collection.pk}, {"type": "pong"}]
    assert not Conversation.objects.exists()

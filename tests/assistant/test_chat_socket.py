"""/ws/chat/ and POST /api/ask through a real daphne with a real websocket client, on the
test database, Redis and the local embedder. The chat model is an OpenAI-compatible server
scripted per prompt (tests/providers/wire.py), so that cancel, busy sockets and timeouts can
be made to happen; the local model's own answers are in test_answering_local.py."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.error
import urllib.request
from typing import Any

import pytest
import websockets

from assistant.answering import prompts
from assistant.models import Conversation, Message
from portal.supervisor import web_command
from tests.conftest import token_for
from tests.portal.test_stack import _session_cookie
from tests.providers.wire import Reply, chunks, completion, serve
from tests.stack import free_port, http_ok, process, wait_for

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("media")]
RATE = 6


def scripted(path: str, body: Any) -> Reply:
    """Route → JSON by the question; answers cite the passage that holds the fact asked for."""
    messages = body["messages"]
    system, user = messages[0]["content"], messages[-1]["content"]
    if "slow" in user:
        return Reply(body=completion('{"strategy": "direct", "reason": "x"}'), delay=4)
    if any(system.startswith(text[:12]) for text in prompts.ROUTER.values()):
        return Reply(body=completion('{"strategy": "direct", "reason": "clear"}'))
    if any(system.startswith(text[:12]) for text in prompts.REWRITE.values()):
        return Reply(body=completion("未休完的年假最多可以累积几天？"))
    found = re.search(r"\[(\d+)\][^\n]*最多累积五天", user)
    answer = f"可以累积，最多五天 [{found.group(1)}]。" if found else "文档中没有找到答案。"
    if "long answer" in user:
        return Reply(body=chunks(*(["很长的回答。"] * 200)), pace=0.05)
    return Reply(body=chunks(*re.findall(r".{1,3}", answer)))


@pytest.fixture(scope="module")
def wire():
    with serve() as server:
        server.responder = scripted
        yield server


@pytest.fixture(scope="module")
def web(django_db_setup, wire, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("daphne") / "daphne.log"
    env = {
        "PROVIDER_CHAT": "openai",
        "BASE_URL_CHAT": f"{wire.url}/v1",
        "API_KEY_CHAT": "sk-test",
        "TIMEOUT_CHAT": "1",
        "PORTAL_ASK_RATE_PER_MINUTE": str(RATE),
    }
    with process(web_command("127.0.0.1", port), log, **env) as proc:
        wait_for(lambda: http_ok(f"http://127.0.0.1:{port}/healthz") or proc.poll() is not None, 60, "daphne", log)
        assert proc.poll() is None, log.read_text()
        yield port


def headers(web: int, user) -> dict[str, str]:
    return {"Cookie": _session_cookie(user), "Origin": f"http://127.0.0.1:{web}"}


async def until_done(ws, timeout: float = 60) -> list[dict[str, Any]]:
    events = []
    while True:
        event = json.loads(await asyncio.wait_for(ws.recv(), timeout=timeout))
        events.append(event)
        if event["type"] in ("done", "error"):
            return events


def ask(question: str, collections: list[int] | None = None, conversation: int | None = None) -> str:
    return json.dumps({"type": "ask", "question": question, "collections": collections, "conversation": conversation})


def test_an_answer_streams_in_protocol_order_and_a_conversation_continues(web, wire, alice, policies):
    login = headers(web, alice)

    async def scenario() -> tuple[list[dict], list[dict]]:
        async with websockets.connect(f"ws://127.0.0.1:{web}/ws/chat/", additional_headers=login) as ws:
            await ws.send(ask("未休完的年假可以累积吗？", [policies.pk]))
            first = await until_done(ws)
            await ws.send(ask("最多几天？", None, first[0]["conversation"]))
            return first, await until_done(ws)

    first, second = asyncio.run(scenario())
    # Each stage is shown as it begins; the reader's best quote comes before any model work.
    stages = [event["stage"] for event in first if event["type"] == "stage"]
    assert stages == ["search", "found", "read", "write"], stages
    kinds = [event["type"] for event in first if event["type"] != "stage"]
    assert kinds[:5] == ["started", "strategy", "memory.used", "retrieval", "evidence"]
    assert kinds[-3:] == ["citations", "attachments", "done"]
    assert set(kinds[5:-3]) == {"answer.delta"}
    assert len(kinds[5:-3]) > 1  # streamed in pieces, not at the end
    assert "最多累积五天" in next(event for event in first if event["type"] == "evidence")["quote"]
    (cited,) = first[-3]["citations"]
    assert (cited["file"], cited["page"]) == ("policy.pdf", 2)
    streamed = "".join(event["text"] for event in first if event["type"] == "answer.delta")
    assert streamed == f"可以累积，最多五天 [{cited['n']}]。"
    assert second[-1]["type"] == "done"
    assert second[0]["conversation"] == first[0]["conversation"]
    conversation = Conversation.objects.get(pk=first[0]["conversation"])
    assert conversation.messages.count() == 4
    assert list(conversation.collections.all()) == [policies]  # the follow-up kept the collections
    # "最多几天？" leans on the first turn: rewritten (no router call) with the history.
    rewrite_prompts = [body["messages"][-1]["content"] for _p, _h, body in wire.requests if not body.get("stream")]
    assert "未休完的年假可以累积吗？" in rewrite_prompts[-1]
    assert second[1] == {
        "type": "strategy",
        "strategy": "rewrite",
        "reason": "refers to an earlier turn",
        "by": "rules",
    }


def test_cancel_stops_the_answer_and_the_socket_takes_the_next_question(web, alice, policies):
    login = headers(web, alice)

    async def scenario() -> tuple[list[dict], list[dict]]:
        async with websockets.connect(f"ws://127.0.0.1:{web}/ws/chat/", additional_headers=login) as ws:
            await ws.send(ask("long answer please", [policies.pk]))
            events = []
            while True:
                event = json.loads(await asyncio.wait_for(ws.recv(), timeout=30))
                events.append(event)
                if event["type"] == "answer.delta" and sum(e["type"] == "answer.delta" for e in events) == 3:
                    await ws.send(json.dumps({"type": "cancel"}))
                if event["type"] in ("done", "error"):
                    break
            await ws.send(ask("未休完的年假可以累积吗？", [policies.pk]))
            return events, await until_done(ws)

    cancelled, after = asyncio.run(scenario())
    assert cancelled[-1] == {**cancelled[-1], "type": "done", "cancelled": True}
    deltas = sum(event["type"] == "answer.delta" for event in cancelled)
    assert 3 <= deltas < 100  # 200 were coming
    stored = Message.objects.get(pk=cancelled[-1]["message"])
    assert stored.error == "cancelled"
    assert stored.content == "".join(event["text"] for event in cancelled if event["type"] == "answer.delta")
    assert after[-1]["type"] == "done"
    assert after[-1]["cancelled"] is False


def test_one_answer_at_a_time_per_socket(web, alice, policies):
    login = headers(web, alice)

    async def scenario() -> list[dict]:
        async with websockets.connect(f"ws://127.0.0.1:{web}/ws/chat/", additional_headers=login) as ws:
            await ws.send(ask("long answer please", [policies.pk]))
            await ws.send(ask("未休完的年假可以累积吗？", [policies.pk]))
            events = await until_done(ws)
            while events[-1]["type"] == "error":  # the refusal; then the first answer ends
                events += await until_done(ws)
            return events

    events = asyncio.run(scenario())
    errors = [event for event in events if event["type"] == "error"]
    assert [error["code"] for error in errors] == ["busy"]
    assert events[-1]["type"] == "done"


def test_strangers_and_invisible_collections_are_refused_and_the_socket_stays_usable(web, alice, charlie, policies):
    login = headers(web, charlie)
    alices = Conversation.objects.create(user=alice).pk

    async def scenario() -> list[dict]:
        url = f"ws://127.0.0.1:{web}/ws/chat/"
        async with websockets.connect(url, additional_headers=login) as ws:
            replies = []
            for message in (
                ask("未休完的年假可以累积吗？", [policies.pk]),
                ask("x", None, alices),
                "not json",
                json.dumps({"type": "ask", "question": 5}),
                json.dumps({"type": "ping"}),
            ):
                await ws.send(message)
                replies.append(json.loads(await asyncio.wait_for(ws.recv(), timeout=10)))
            return replies

    refused, foreign, garbled, invalid, pong = asyncio.run(scenario())
    assert (refused["type"], refused["code"]) == ("error", "not_found")
    assert (foreign["type"], foreign["code"]) == ("error", "not_found")
    assert "Alice" not in json.dumps(refused)
    assert (garbled["code"], invalid["code"]) == ("invalid", "invalid")
    assert pong == {"type": "pong"}
    assert not Message.objects.filter(conversation__user=charlie).exists()

    async def anonymous() -> int | None:
        async with websockets.connect(f"ws://127.0.0.1:{web}/ws/chat/") as ws:
            try:
                await asyncio.wait_for(ws.recv(), timeout=10)
            except websockets.ConnectionClosed as closed:
                return closed.rcvd.code if closed.rcvd else None
        return None

    assert asyncio.run(anonymous()) == 4401


def test_a_model_timeout_is_a_readable_error_and_the_socket_stays_usable(web, alice, policies):
    login = headers(web, alice)

    async def scenario() -> tuple[list[dict], list[dict]]:
        async with websockets.connect(f"ws://127.0.0.1:{web}/ws/chat/", additional_headers=login) as ws:
            await ws.send(ask("slow question", [policies.pk]))
            failed = await until_done(ws, timeout=60)
            await ws.send(ask("未休完的年假可以累积吗？", [policies.pk]))
            return failed, await until_done(ws)

    failed, after = asyncio.run(scenario())
    assert failed[-1]["type"] == "error"
    assert failed[-1]["code"] == "model"
    assert "TIMEOUT_CHAT" in failed[-1]["message"]
    assert after[-1]["type"] == "done"


def post_ask(
    web: int, key: str, body: dict[str, Any], accept: str = "application/json", timeout: float = 60
) -> tuple[int, bytes]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{web}/api/ask/",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Token {key}", "Content-Type": "application/json", "Accept": accept},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def sse_events(raw: bytes) -> list[dict[str, Any]]:
    events = []
    for block in raw.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in lines:
            event = json.loads(lines["data"])
            assert lines["event"] == event["type"]
            events.append(event)
    return events


def test_the_json_and_event_stream_forms_of_ask_agree(web, api, alice, policies):
    key = token_for(api, alice)
    question = {"question": "未休完的年假可以累积吗？", "collections": [policies.pk]}
    status, raw = post_ask(web, key, question)
    assert status == 200, raw
    answer = json.loads(raw)
    status, raw = post_ask(web, key, question, accept="text/event-stream")
    assert status == 200
    events = sse_events(raw)
    kinds = [event["type"] for event in events if event["type"] != "stage"]
    assert kinds[:5] == ["started", "strategy", "memory.used", "retrieval", "evidence"]
    assert events[-1]["type"] == "done"
    assert answer["answer"] == "".join(event["text"] for event in events if event["type"] == "answer.delta")
    streamed = next(event for event in events if event["type"] == "citations")["citations"]
    assert [(c["file"], c["page"], c["chunk_id"]) for c in answer["citations"]] == [
        (c["file"], c["page"], c["chunk_id"]) for c in streamed
    ]
    assert answer["strategy"] == "direct"
    assert answer["abstain"] is False
    assert answer["citations"][0]["page"] == 2
    assert {"first_event", "retrieval", "total"} <= answer["timings"].keys()
    # Conversations: listed for their user only, deletable.
    listed = api.get("/api/conversations/").json()["results"]
    assert {item["id"] for item in listed} == {answer["conversation"], events[0]["conversation"]}
    detail = api.get(f"/api/conversations/{answer['conversation']}/").json()
    assert [m["role"] for m in detail["messages"]] == ["user", "assistant"]
    assert api.delete(f"/api/conversations/{answer['conversation']}/").status_code == 204
    assert not Conversation.objects.filter(pk=answer["conversation"]).exists()


def test_ask_refuses_bad_input_invisible_collections_and_too_many_questions(web, api, alice, charlie, policies):
    key = token_for(api, charlie)
    status, raw = post_ask(web, key, {"question": "年假？", "collections": [policies.pk]})
    assert status == 404
    assert b"Alice" not in raw
    status, raw = post_ask(web, key, {"question": ""}, accept="text/event-stream")
    assert status == 400
    assert sse_events(raw)[0]["type"] == "error"
    statuses = [post_ask(web, key, {"question": "年假有几天？"})[0] for _ in range(RATE)]
    assert statuses[-1] == 429  # the refused question above counted too
    assert set(statuses[:-1]) == {200}


def test_the_next_question_is_taken_as_soon_as_done_arrives(alice, monkeypatch):
    # The answer's thread still tidies up after `done`: a client that asks at once must not get "busy".
    from channels.testing import WebsocketCommunicator

    from assistant import consumers
    from assistant.answering.events import Done, Started

    async def slow_to_tidy_up(produce, cancel):
        yield Done(cancelled=False, conversation=1, message=2, timings={})
        await asyncio.sleep(1)

    monkeypatch.setattr(consumers, "events_in_thread", slow_to_tidy_up)
    # The socket's own logic only: no database work in the consumer's threads.
    monkeypatch.setattr(consumers, "allow_question", lambda user_id: True)
    monkeypatch.setattr(consumers, "start", lambda user, question, **kwargs: object())
    monkeypatch.setattr(consumers, "started", lambda session: Started(conversation=1, message=1))

    async def scenario() -> list[str]:
        communicator = WebsocketCommunicator(consumers.ChatConsumer.as_asgi(), "/ws/chat/")
        communicator.scope["user"] = alice
        await communicator.connect()
        kinds = []
        for _ in range(2):
            await communicator.send_json_to({"type": "ask", "question": "年假有几天？", "collections": None})
            kinds += [(await communicator.receive_json_from(timeout=10))["type"] for _ in range(2)]
        await communicator.disconnect()
        return kinds

    assert asyncio.run(asyncio.wait_for(scenario(), 30)) == ["started", "done", "started", "done"]

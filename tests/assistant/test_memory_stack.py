"""Memory end to end, through real processes: a question over the websocket (daphne), its
memory card made by a real Celery worker (mem0's own OpenAI client, at an OpenAI-compatible
server scripted per prompt: tests/providers/wire.py), and the memory recalled in a later
conversation: `memory.used` and the answer's prompt. Another user asking the same words gets
none of it. The local model's own extraction is in test_memory_local.py."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
import websockets
from mem0.configs.prompts import ADDITIVE_EXTRACTION_PROMPT

from assistant.answering import prompts
from assistant.memory.service import memories
from portal.supervisor import MEMORY_QUEUE, web_command, worker_command
from tests.assistant.test_chat_socket import ask, headers, until_done
from tests.providers.wire import Reply, chunks, completion, serve
from tests.stack import free_port, http_ok, process, wait_for

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("media")]

PREFERENCE = "用户喜欢用表格形式的回答"


def scripted(path: str, body: Any) -> Reply:
    messages = body["messages"]
    system, user = messages[0]["content"], messages[-1]["content"]
    if system.startswith(ADDITIVE_EXTRACTION_PROMPT[:200]):  # mem0's extraction, in the worker
        turn = user.split("## New Messages", 1)[-1]
        found = [{"id": "0", "text": PREFERENCE, "attributed_to": "user"}] if "表格" in turn.split("##")[0] else []
        return Reply(body=completion(json.dumps({"memory": found}, ensure_ascii=False)))
    if any(system.startswith(text[:12]) for text in prompts.ROUTER.values()):
        return Reply(body=completion('{"strategy": "direct", "reason": "clear"}'))
    answer = "好的，我会用表格回答。" if PREFERENCE in user else "文档中没有找到答案。"
    if not body.get("stream"):  # the portal's second try after a refusal asks for one reply
        return Reply(body=completion(answer))
    return Reply(body=chunks(*re.findall(r".{1,3}", answer)))


def extractions(wire) -> list[dict[str, Any]]:
    bodies = wire.bodies("/v1/chat/completions")
    return [body for body in bodies if body["messages"][0]["content"].startswith(ADDITIVE_EXTRACTION_PROMPT[:200])]


@pytest.fixture(scope="module")
def wire():
    with serve() as server:
        server.responder = scripted
        yield server


def model_env(wire) -> dict[str, str]:
    return {"PROVIDER_CHAT": "openai", "BASE_URL_CHAT": f"{wire.url}/v1", "API_KEY_CHAT": "sk-test"}


@pytest.fixture(scope="module")
def web(django_db_setup, wire, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("daphne") / "daphne.log"
    with process(web_command("127.0.0.1", port), log, **model_env(wire)) as proc:
        wait_for(lambda: http_ok(f"http://127.0.0.1:{port}/healthz") or proc.poll() is not None, 60, "daphne", log)
        assert proc.poll() is None, log.read_text()
        yield port


@pytest.fixture
def worker(wire, tmp_path):
    log = tmp_path / "worker.log"
    with process(worker_command("memory-test@%h", 1, MEMORY_QUEUE), log, **model_env(wire)) as proc:
        wait_for(lambda: b"ready." in log.read_bytes() or proc.poll() is not None, 60, "worker start", log)
        assert proc.poll() is None, log.read_text()
        yield log


def test_a_preference_told_once_is_remembered_in_a_later_conversation_and_only_for_its_owner(
    web, wire, worker, alice, bob, policies
):
    logins = {alice: headers(web, alice), bob: headers(web, bob)}

    async def conversation(user, question: str) -> list[dict[str, Any]]:
        async with websockets.connect(f"ws://127.0.0.1:{web}/ws/chat/", additional_headers=logins[user]) as ws:
            await ws.send(ask(question))
            return await until_done(ws)

    def used(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        (event,) = [event for event in events if event["type"] == "memory.used"]
        return event["memories"]

    first = asyncio.run(conversation(alice, "以后请用表格形式回答我。年假有几天？"))
    assert first[-1]["type"] == "done"
    assert used(first) == []  # nothing remembered yet

    # The memory worker extracts it after the answer, off its path.
    wait_for(lambda: [m.text for m in memories().all(alice)] == [PREFERENCE], 120, "the memory card", worker)
    (extraction,) = extractions(wire)
    assert "用中文记录" in extraction["messages"][-1]["content"]  # the Chinese instruction for a Chinese question

    later = asyncio.run(conversation(alice, "我喜欢什么形式的回答？"))
    assert later[0]["conversation"] != first[0]["conversation"]
    assert [memory["text"] for memory in used(later)] == [PREFERENCE]
    assert "".join(e["text"] for e in later if e["type"] == "answer.delta") == "好的，我会用表格回答。"

    asked_before = len(wire.requests)
    theirs = asyncio.run(conversation(bob, "我喜欢什么形式的回答？"))  # alice's very words
    assert used(theirs) == []
    assert PREFERENCE not in json.dumps(theirs, ensure_ascii=False)
    assert all(PREFERENCE not in json.dumps(body, ensure_ascii=False) for _p, _h, body in wire.requests[asked_before:])
    # Questions say nothing about who asks: no extraction was queued for them.
    assert len(extractions(wire)) == 1
    assert [m.text for m in memories().all(alice)] == [PREFERENCE]

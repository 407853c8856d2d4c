"""A /v1 answer streamed with `stream: true` that fails part way, after its first chunks are
sent, still ends as OpenAI's clients expect an error to: an `error` event, then
`data: [DONE]`, so that the client stops reading instead of waiting on an open connection.
The answering pipeline is replaced here by one that fails after its first words (nothing
real fails on demand: the input that made it fail is refused up front now)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator

from assistant.answering.events import AnswerDelta, Event
from assistant.answering.session import Session
from tests.conftest import token_for

SECRET = "relation portal_secret does not exist"


async def failing_part_way(session: Session) -> AsyncIterator[Event]:
    yield AnswerDelta(text="Falcon routers have a warranty of ")
    raise RuntimeError(SECRET)


async def read(parts: AsyncIterator[bytes]) -> str:
    return b"".join([part async for part in parts]).decode()


def test_a_stream_that_fails_part_way_ends_with_an_error_and_done(api, alice, monkeypatch, caplog):
    monkeypatch.setattr("agents.completions.streamed_events", failing_part_way)
    token_for(api, alice)
    body = {"model": "kb-all", "messages": [{"role": "user", "content": "How long is the warranty?"}], "stream": True}
    with caplog.at_level(logging.ERROR, logger="agents.completions"):
        response = api.post("/v1/chat/completions", body, format="json")
        assert response.status_code == 200
        events = asyncio.run(read(response.streaming_content)).strip().split("\n\n")
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(event.removeprefix("data: ")) for event in events[:-1]]
    assert [c["choices"][0]["delta"].get("content") for c in chunks[:-1]] == ["", "Falcon routers have a warranty of "]
    error = chunks[-1]["error"]
    assert error["type"] == "api_error"
    assert error["code"] == "internal_error"
    assert "logged" in error["message"]
    assert SECRET not in error["message"]
    assert any(SECRET in str(record.exc_info[1]) for record in caplog.records if record.exc_info)

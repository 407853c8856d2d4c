"""MCP errors as the specification (2025-11-25) has them, with the official client against a
real daphne: an unknown tool is a JSON-RPC protocol error (-32602); arguments that do not fit
a tool's input schema are a tool error the agent can correct (SEP-1303) that names each
argument and its type, never the value sent nor pydantic's site; any method but POST is
answered at once with a 405; search and get_page are counted against the user's reads a
minute."""

from __future__ import annotations

import time
from typing import Any

import httpx2
import pytest
from django.conf import settings
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import TextContent

from knowledge import actions
from portal import limits
from tests.agents.test_mcp import over_mcp

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("media")]


def key_of(user) -> str:
    _token, key = actions.do_create_token(user, "agent")
    return key


def test_an_unknown_tool_is_a_protocol_error(web, alice):
    async def steps(session: ClientSession) -> MCPError:
        with pytest.raises(MCPError) as unknown:
            await session.call_tool("no_such_tool", {"query": "x"})
        assert not (await session.call_tool("list_collections", {})).is_error  # the session goes on
        return unknown.value

    error = over_mcp(web, key_of(alice), steps)
    assert error.code == -32602
    assert error.message == "Unknown tool: no_such_tool"


def test_arguments_of_the_wrong_type_are_a_tool_error_naming_types_not_values(web, alice):
    async def steps(session: ClientSession) -> list[str]:
        texts = []
        cases: list[tuple[str, dict[str, Any]]] = [
            ("search", {"query": 42, "k": "many-secret"}),
            ("search", {"query": "x", "collections": ["secret-id"]}),
            ("get_page", {"document": "secret-doc"}),
            ("ask", {"question": ["secret", "question"]}),
        ]
        for name, arguments in cases:
            result = await session.call_tool(name, arguments)
            assert result.is_error, (name, result)
            texts.append(_text(result))
        return texts

    texts = over_mcp(web, key_of(alice), steps)
    assert (
        texts[0] == "These arguments do not fit the tool's input schema: query should be string; k should be integer."
    )
    assert texts[1] == "These arguments do not fit the tool's input schema: collections should be array or null."
    assert texts[2] == (
        "These arguments do not fit the tool's input schema: document should be integer; page is missing."
    )
    assert texts[3] == "These arguments do not fit the tool's input schema: question should be string."
    for text in texts:
        assert "secret" not in text
        assert "many" not in text
        assert "pydantic" not in text
        assert "http" not in text


def test_a_get_or_delete_is_answered_at_once_with_405(web, alice):
    headers = {"Authorization": f"Bearer {key_of(alice)}", "Accept": "text/event-stream"}
    for method in ("GET", "DELETE"):
        started = time.monotonic()
        response = httpx2.request(method, f"http://127.0.0.1:{web}/mcp/", headers=headers, timeout=5)
        assert time.monotonic() - started < 1
        assert response.status_code == 405
        assert response.headers["allow"] == "POST"
        assert response.json()["error"]
    anonymous = httpx2.get(f"http://127.0.0.1:{web}/mcp/", timeout=5)
    assert anonymous.status_code == 401  # the token is checked first


def test_search_and_get_page_are_refused_after_the_users_reads_a_minute(web, alice, bob):
    per_minute = settings.MCP_READS_PER_MINUTE  # the daphne's, from the same environment
    for user in (alice, bob):  # no count from an earlier run within the minute
        limits._client(settings.REDIS_URL).delete(f"{limits.PREFIX}:mcp_reads:{user.pk}")

    async def steps(session: ClientSession) -> list[str]:
        texts = []
        for n in range(per_minute):
            if n % 2:
                result = await session.call_tool("search", {"query": "annual leave", "k": 1})
                assert not result.is_error, result.content
            else:
                result = await session.call_tool("get_page", {"document": 999_999, "page": 1})
                assert "Not found" in _text(result)  # counted all the same
        limited: list[tuple[str, dict[str, Any]]] = [
            ("search", {"query": "annual leave"}),
            ("get_page", {"document": 1, "page": 1}),
        ]
        for name, arguments in limited:
            refused = await session.call_tool(name, arguments)
            assert refused.is_error
            texts.append(_text(refused))
        assert not (await session.call_tool("list_collections", {})).is_error  # not counted
        return texts

    texts = over_mcp(web, key_of(alice), steps)
    for text in texts:
        assert text.endswith(
            f"Too many searches and page reads in a minute (at most {per_minute}); wait a little and try again."
        ), text

    async def as_bob(session: ClientSession) -> bool:
        return (await session.call_tool("search", {"query": "annual leave", "k": 1})).is_error

    assert over_mcp(web, key_of(bob), as_bob) is False  # a count of each user's own


def _text(result: Any) -> str:
    first = result.content[0]
    assert isinstance(first, TextContent), first
    return first.text

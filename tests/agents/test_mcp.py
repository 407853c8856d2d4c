"""The MCP server at /mcp/ with the official `mcp` client over Streamable HTTP, against a real
daphne: every tool as the token's user, another user's token finding nothing of alice's, a
revoked token refused at its next call, and bad input answered as a tool or protocol error,
never a crash."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from knowledge import actions
from tests.assistant.chat_files import files, ingest_files
from tests.conftest import make_collection

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("media")]
TOOLS = {"list_collections", "list_documents", "search", "get_page", "ask"}


def key_of(user) -> str:
    _token, key = actions.do_create_token(user, "agent")
    return key


def over_mcp(port: int, key: str, steps: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    async def scenario() -> Any:
        headers = {"Authorization": f"Bearer {key}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            streamable_http_client(f"http://127.0.0.1:{port}/mcp/", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await steps(session)

    return asyncio.run(scenario())


def structured(result: Any) -> Any:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        value = result.structured_content
        return value.get("result", value) if isinstance(value, dict) and set(value) == {"result"} else value
    return json.loads(result.content[0].text)


def test_every_tool_reads_what_the_tokens_user_may_see(web, alice, bob, private_collection):
    ingest_files(private_collection, files())
    alices = key_of(alice)
    heard_progress: list[float] = []

    async def steps(session: ClientSession) -> dict[str, Any]:
        listed = await session.list_tools()
        found: dict[str, Any] = {"tools": {tool.name: tool for tool in listed.tools}}
        found["collections"] = structured(await session.call_tool("list_collections", {}))
        found["documents"] = structured(
            await session.call_tool("list_documents", {"collection": private_collection.pk})
        )
        found["search"] = structured(
            await session.call_tool("search", {"query": "How many days of annual leave?", "k": 3})
        )
        hit = found["search"]["hits"][0]
        found["page"] = structured(
            await session.call_tool("get_page", {"document": hit["document"], "page": hit["page"], "image": True})
        )

        async def heard(progress: float, total: float | None, message: str | None) -> None:
            heard_progress.append(progress)

        found["ask"] = structured(
            await session.call_tool(
                "ask",
                {"question": "报销单须在出差结束后多少天内提交？", "collections": [private_collection.pk]},
                progress_callback=heard,
            )
        )
        return found

    found = over_mcp(web, alices, steps)
    assert set(found["tools"]) == TOOLS
    assert all(tool.description and tool.input_schema["type"] == "object" for tool in found["tools"].values())
    assert found["collections"] == [
        {"id": private_collection.pk, "name": private_collection.name, "description": "", "documents": 3}
    ]
    assert sorted(d["path"] for d in found["documents"]) == ["falcon.md", "heron.md", "policy.pdf"]
    hit = found["search"]["hits"][0]
    assert (hit["file"], hit["page"]) == ("policy.pdf", 2)
    assert "ten days" in hit["text"] or "十天" in hit["text"]
    assert hit["link"].startswith(f"/documents/{hit['document']}/pages/2/?chunk=")
    assert "十天带薪年假" in found["page"]["text"]
    assert found["page"]["image_png_base64"].startswith("iVBORw0KGgo")  # a PNG
    answer = found["ask"]
    assert "三十天" in answer["answer"], answer
    assert any(c["page"] == 3 for c in answer["citations"]), answer["citations"]
    assert heard_progress, "no progress notification was sent while the answer was written"

    # bob, with a token of his own, sees none of it: not found, never alice's text.
    bobs = key_of(bob)

    async def as_bob(session: ClientSession) -> dict[str, Any]:
        return {
            "collections": structured(await session.call_tool("list_collections", {})),
            "documents": await session.call_tool("list_documents", {"collection": private_collection.pk}),
            "search": await session.call_tool(
                "search", {"query": "annual leave", "collections": [private_collection.pk]}
            ),
            "everywhere": structured(await session.call_tool("search", {"query": "annual leave"})),
            "page": await session.call_tool("get_page", {"document": hit["document"], "page": 2}),
            "ask": await session.call_tool("ask", {"question": "年假有几天？", "collections": [private_collection.pk]}),
        }

    seen = over_mcp(web, bobs, as_bob)
    assert seen["collections"] == []
    assert seen["everywhere"]["hits"] == []
    for name in ("documents", "search", "page", "ask"):
        assert seen[name].is_error, name
        assert "Not found" in seen[name].content[0].text, (name, seen[name].content)


def test_without_a_valid_token_nothing_is_served_and_a_revoked_one_stops_at_once(web, alice):
    plain = httpx2.post(f"http://127.0.0.1:{web}/mcp/", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert plain.status_code == 401
    assert plain.headers["www-authenticate"].startswith("Bearer")
    wrong = httpx2.post(
        f"http://127.0.0.1:{web}/mcp/",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": "Bearer kp_not-a-key"},
    )
    assert wrong.status_code == 401
    key = key_of(alice)
    assert over_mcp(web, key, lambda s: s.call_tool("list_collections", {})).is_error is False
    token = alice.api_tokens.get()
    actions.do_revoke_token(token)
    with pytest.raises(Exception):  # noqa: B017, PT011 (the client raises its transport's error)
        over_mcp(web, key, lambda s: s.call_tool("list_collections", {}))


def test_bad_input_is_a_clear_error_and_the_session_goes_on(web, alice, private_collection):
    key = key_of(alice)

    async def steps(session: ClientSession) -> list[Any]:
        results: list[Any] = []
        calls: list[tuple[str, dict[str, Any]]] = [
            ("no_such_tool", {}),
            ("search", {"query": 42, "k": "many"}),
            ("search", {"query": "x", "k": 10_000}),
            ("search", {"query": "年" * 2_001}),
            ("ask", {"question": "q" * 2_001}),
            ("search", {"query": "x" * 1_000_000}),
            ("get_page", {"document": 999_999, "page": 1}),
        ]
        for name, arguments in calls:
            try:
                results.append(await session.call_tool(name, arguments))
            except Exception as exc:  # a protocol error, raised by the client
                results.append(exc)
        results.append(await session.call_tool("list_collections", {}))  # the session still works
        return results

    results = over_mcp(web, key, steps)
    *bad, last = results
    for result in bad:
        assert isinstance(result, Exception) or result.is_error, result
    texts = [str(r) if isinstance(r, Exception) else r.content[0].text for r in bad]
    assert "no_such_tool" in texts[0]
    assert "k: Ensure this value is less than or equal to 50." in texts[2]
    assert "query: Ensure this field has no more than 2000 characters." in texts[3]
    assert "Not found" in texts[6]
    assert not last.is_error


def test_a_token_limited_to_one_collection_shows_the_agent_only_that_one(web, alice, private_collection):
    other = make_collection(alice, "Other notes")
    _token, key = actions.do_create_token(alice, "agent", read_only=True, collections=[other])

    async def steps(session: ClientSession) -> tuple[Any, Any]:
        listed = structured(await session.call_tool("list_collections", {}))
        documents = await session.call_tool("list_documents", {"collection": private_collection.pk})
        return listed, documents

    listed, documents = over_mcp(web, key, steps)
    assert [row["id"] for row in listed] == [other.pk]
    assert documents.is_error
    assert "Not found" in documents.content[0].text

"""The limited-token column for agents (knowledge/principal.py): a token limited to one of
alice's collections finds nothing of her other one through any MCP tool or `/v1`, not even
by continuing a conversation that read it; its own collection works."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.client.session import ClientSession

from assistant.models import Conversation, Message
from knowledge import actions
from knowledge.models import Document
from tests.agents.test_mcp import over_mcp, structured
from tests.assistant.chat_files import ingest_files
from tests.conftest import make_collection

SECRET = "The Kestrel launch code is 4417."
SHARED = "The handbook says lunch is at noon."


def _conversation_about(alice, collection) -> Conversation:
    conversation = Conversation.objects.create(user=alice, title="about kestrel")
    Message.objects.create(conversation=conversation, role="user", content="kestrel?")
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        content=SECRET,
        searched=[{"id": collection.pk, "name": collection.name, "version": 1}],
    )
    return conversation


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("media")
def test_no_mcp_tool_reaches_past_a_limited_tokens_collection(web, alice, private_collection):
    ingest_files(private_collection, {"kestrel.md": f"# Kestrel\n\n{SECRET}\n".encode()})
    other = make_collection(alice, "Handbook")
    ingest_files(other, {"handbook.md": f"# Handbook\n\n{SHARED}\n".encode()})
    secret_document = Document.objects.get(collection=private_collection)
    own_document = Document.objects.get(collection=other).pk
    conversation = _conversation_about(alice, private_collection)
    _token, key = actions.do_create_token(alice, "agent", collections=[other])

    async def steps(session: ClientSession) -> dict[str, Any]:
        found: dict[str, Any] = {}
        found["search all"] = structured(await session.call_tool("search", {"query": "Kestrel launch code", "k": 5}))
        found["search private"] = await session.call_tool(
            "search", {"query": "Kestrel launch code", "collections": [private_collection.pk]}
        )
        found["page"] = await session.call_tool("get_page", {"document": secret_document.pk, "page": 1})
        found["ask private"] = await session.call_tool(
            "ask", {"question": "What is the Kestrel launch code?", "collections": [private_collection.pk]}
        )
        found["ask continuing"] = await session.call_tool(
            "ask", {"question": "And the code again?", "conversation": conversation.pk}
        )
        found["ask all"] = structured(await session.call_tool("ask", {"question": "What is the Kestrel launch code?"}))
        found["own page"] = structured(await session.call_tool("get_page", {"document": own_document, "page": 1}))
        return found

    found = over_mcp(web, key, steps)
    assert found["search all"]["hits"], "its own collection is searched"
    assert {hit["document"] for hit in found["search all"]["hits"]} == {own_document}
    for refused in ("search private", "page", "ask private", "ask continuing"):
        assert found[refused].is_error, refused
        assert "4417" not in str(found[refused].content), refused
    assert "4417" not in str(found["ask all"])
    assert {citation["document"] for citation in found["ask all"]["citations"]} <= {own_document}
    assert "lunch" in found["own page"]["text"]


@pytest.mark.django_db
def test_v1_offers_a_limited_token_only_its_collections(api, alice, private_collection, team_collection):
    _token, key = actions.do_create_token(alice, "agent", collections=[team_collection])
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    models = {model["id"] for model in api.get("/v1/models").json()["data"]}
    assert f"kb-{team_collection.pk}" in models
    assert f"kb-{private_collection.pk}" not in models
    asked = api.post(
        "/v1/chat/completions",
        {"model": f"kb-{private_collection.pk}", "messages": [{"role": "user", "content": "Kestrel?"}]},
        format="json",
    )
    assert asked.status_code == 404
    assert asked.json()["error"]["code"] == "model_not_found"

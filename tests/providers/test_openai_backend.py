"""The OpenAI-compatible backend and the /rerank backend against a local server that speaks
their wire formats: requests well-formed, responses parsed, errors mapped and retried."""

from __future__ import annotations

import base64
from unittest import mock

import pytest

from providers.base import ChatMessage, ProviderError
from providers.config import RoleConfig
from providers.openai_compat import OpenAIChatModel, OpenAIEmbedder, OpenAIVisionModel
from providers.rerank_http import HttpReranker
from tests.providers.conftest import PNG
from tests.providers.wire import Reply, chunks, completion, embeddings

QUESTION = [ChatMessage("system", "Answer briefly."), ChatMessage("user", "退款政策是什么？")]


def config(wire, role="chat", **extra) -> RoleConfig:
    values = {"model": "qwen-plus", "base_url": f"{wire.url}/v1", "api_key": "sk-test", "timeout": 2.0, **extra}
    return RoleConfig(role=role, provider="openai", **values)


def test_it_sends_a_well_formed_chat_request_and_parses_the_answer(wire):
    wire.on("/v1/chat/completions", Reply(body=completion("30 天内可退款。")))
    result = OpenAIChatModel(config(wire)).complete(QUESTION, json_mode=True, max_tokens=64)
    assert result.text == "30 天内可退款。"
    assert (result.prompt_tokens, result.completion_tokens) == (7, 3)
    _path, headers, body = wire.requests[0]
    assert headers["authorization"] == "Bearer sk-test"
    assert body["model"] == "qwen-plus"
    assert body["max_tokens"] == 64
    assert body["messages"] == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "退款政策是什么？"},
    ]
    assert body["response_format"] == {"type": "json_object"}


def test_it_streams_tokens_as_they_arrive(wire):
    wire.on("/v1/chat/completions", Reply(body=chunks("30 ", "天内", "可退款。")))
    pieces = list(OpenAIChatModel(config(wire)).stream(QUESTION))
    assert pieces == ["30 ", "天内", "可退款。"]
    assert wire.bodies("/v1/chat/completions")[0]["stream"] is True


def test_it_retries_a_server_error_then_succeeds(wire):
    wire.on("/v1/chat/completions", Reply(500, {"error": {"message": "overloaded"}}), Reply(body=completion("ok")))
    assert OpenAIChatModel(config(wire)).complete(QUESTION).text == "ok"
    assert len(wire.requests) == 2


@pytest.mark.parametrize(
    ("reply", "message", "calls"),
    [
        (Reply(401, {"error": {"message": "bad key"}}), "check API_KEY_CHAT", 1),
        (Reply(404, {"error": {"message": "no such model"}}), "check MODEL_CHAT", 1),
        (Reply(429, {"error": {"message": "slow down"}}), "rate limited", 3),
        (Reply(503, {"error": {"message": "down"}}), "answered 503", 3),
        (Reply(200, body="this is not json"), "malformed response: not valid JSON", 1),
    ],
)
def test_it_maps_errors_to_what_to_fix(wire, reply, message, calls):
    wire.on("/v1/chat/completions", reply)
    with pytest.raises(ProviderError, match=message) as raised:
        OpenAIChatModel(config(wire)).complete(QUESTION)
    assert str(raised.value).startswith("chat model (openai):")
    assert len(wire.requests) == calls


def test_it_names_the_timeout_setting(wire):
    wire.on("/v1/chat/completions", Reply(body=completion("late"), delay=1.5))
    with pytest.raises(ProviderError, match="TIMEOUT_CHAT"):
        OpenAIChatModel(config(wire, timeout=0.5)).complete(QUESTION)


def test_it_names_the_base_url_when_nothing_listens():
    unreachable = RoleConfig(
        role="chat", provider="openai", model="m", base_url="http://127.0.0.1:1/v1", api_key="k", timeout=1.0
    )
    with mock.patch("providers.retry.pause"), pytest.raises(ProviderError, match="BASE_URL_CHAT"):
        OpenAIChatModel(unreachable).complete(QUESTION)


def test_it_sends_images_as_base64_data_urls(wire, tmp_path):
    wire.on("/v1/chat/completions", Reply(body=completion("A red dot.")))
    image = tmp_path / "dot.png"
    image.write_bytes(PNG)
    assert OpenAIVisionModel(config(wire, role="vision")).describe(image, "What is this?") == "A red dot."
    content = wire.bodies("/v1/chat/completions")[0]["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": "What is this?"}
    assert content[1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()


def test_it_embeds_in_order_and_reads_dims(wire):
    wire.on(
        "/v1/embeddings",
        Reply(body=embeddings([0.1, 0.2, 0.3], [0.4, 0.5, 0.6])),
        Reply(body=embeddings([0.7, 0.8, 0.9])),
    )
    embedder = OpenAIEmbedder(config(wire, role="embedding", model="text-embedding-v3"))
    assert embedder.embed_documents(["甲", "乙"]) == [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]
    assert wire.bodies("/v1/embeddings")[0] == {
        "model": "text-embedding-v3",
        "input": ["甲", "乙"],
        "encoding_format": "float",
    }
    assert embedder.dims == 3  # read from the model: one probe request
    assert wire.bodies("/v1/embeddings")[1]["input"] == ["dimension probe"]


def test_it_refuses_a_short_embedding_answer(wire):
    wire.on("/v1/embeddings", Reply(body=embeddings([0.1, 0.2])))
    with pytest.raises(ProviderError, match="1 embeddings for 2 texts"):
        OpenAIEmbedder(config(wire, role="embedding")).embed_documents(["a", "b"])


def test_it_reranks_with_the_cohere_style_endpoint(wire):
    wire.on(
        "/v1/rerank",
        Reply(body={"results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.2}]}),
    )
    reranker = HttpReranker(
        RoleConfig(
            role="rerank",
            provider="http",
            model="bge-reranker-v2-m3",
            base_url=f"{wire.url}/v1",
            api_key="k",
            timeout=2.0,
        )
    )
    assert reranker.score("退款", ["年会通知", "退款政策"]) == [0.2, 0.9]
    body = wire.bodies("/v1/rerank")[0]
    assert body == {"model": "bge-reranker-v2-m3", "query": "退款", "documents": ["年会通知", "退款政策"], "top_n": 2}


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply(401, {"detail": "no"}), "API_KEY_RERANK"),
        (Reply(200, {"results": [{"index": 5}]}), "malformed"),
        (Reply(502, "bad gateway"), "answered 502"),
    ],
)
def test_it_maps_rerank_errors(wire, reply, message):
    wire.on("/v1/rerank", reply)
    reranker = HttpReranker(RoleConfig(role="rerank", provider="http", model="r", base_url=f"{wire.url}/v1"))
    with pytest.raises(ProviderError, match=message):
        reranker.score("q", ["a"])

"""The DashScope backend through its real SDK against a local server speaking DashScope's
wire format: request bodies, streaming, response parsing and error mapping."""

from __future__ import annotations

import base64
from unittest import mock

import pytest

from providers.base import ChatMessage, ProviderError
from providers.config import RoleConfig
from providers.dashscope import (
    DashScopeChatModel,
    DashScopeEmbedder,
    DashScopeImageEmbedder,
    DashScopeReranker,
    DashScopeVisionModel,
)
from tests.providers.conftest import PNG
from tests.providers.wire import Reply

GENERATION = "/api/v1/services/aigc/text-generation/generation"
VISION = "/api/v1/services/aigc/multimodal-generation/generation"
EMBEDDING = "/api/v1/services/embeddings/text-embedding/text-embedding"
MULTIMODAL = "/api/v1/services/embeddings/multimodal-embedding/multimodal-embedding"
RERANK = "/api/v1/services/rerank/text-rerank/text-rerank"


def config(wire, role: str, model: str, **extra) -> RoleConfig:
    values = {"base_url": f"{wire.url}/api/v1", "api_key": "sk-ds", "timeout": 2.0, **extra}
    return RoleConfig(role=role, provider="dashscope", model=model, **values)  # type: ignore[arg-type]


def answer(text: str) -> dict:
    return {
        "request_id": "r1",
        "output": {"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": text}}]},
        "usage": {"input_tokens": 12, "output_tokens": 4, "total_tokens": 16},
    }


def test_it_chats_with_qwen(wire):
    wire.on(GENERATION, Reply(body=answer('{"strategy": "direct"}')))
    model = DashScopeChatModel(config(wire, "chat", "qwen-plus"))
    result = model.complete([ChatMessage("user", "路由这个问题")], json_mode=True, max_tokens=50)
    assert result.text == '{"strategy": "direct"}'
    assert (result.prompt_tokens, result.completion_tokens) == (12, 4)
    _path, headers, body = wire.requests[0]
    assert headers["authorization"] == "Bearer sk-ds"
    assert body["model"] == "qwen-plus"
    assert body["input"] == {"messages": [{"role": "user", "content": "路由这个问题"}]}
    assert body["parameters"]["result_format"] == "message"
    assert body["parameters"]["max_tokens"] == 50
    assert body["parameters"]["response_format"] == {"type": "json_object"}


def test_it_streams_incremental_output(wire):
    events = [
        {
            "output": {"choices": [{"message": {"role": "assistant", "content": piece}, "finish_reason": "null"}]},
            "usage": {"input_tokens": 3, "output_tokens": 1},
        }
        for piece in ("年会", "在", "14 号")
    ]
    wire.on(GENERATION, Reply(body=events, done=False))
    pieces = list(DashScopeChatModel(config(wire, "chat", "qwen-plus")).stream([ChatMessage("user", "年会？")]))
    assert pieces == ["年会", "在", "14 号"]
    _path, headers, body = wire.requests[0]
    assert headers["x-dashscope-sse"] == "enable"
    assert body["parameters"]["incremental_output"] is True


@pytest.mark.parametrize(
    ("reply", "message", "calls"),
    [
        (
            Reply(401, {"code": "InvalidApiKey", "message": "Invalid API-key provided.", "request_id": "r"}),
            "check API_KEY_CHAT or DASHSCOPE_API_KEY",
            1,
        ),
        (
            Reply(429, {"code": "Throttling.RateQuota", "message": "Requests rate limit exceeded", "request_id": "r"}),
            "rate limited",
            3,
        ),
        (
            Reply(400, {"code": "InvalidParameter", "message": "Range of max_tokens is wrong", "request_id": "r"}),
            "answered 400 InvalidParameter: Range of max_tokens",
            1,
        ),
        (Reply(500, {"code": "InternalError", "message": "oops", "request_id": "r"}), "answered 500", 3),
    ],
)
def test_it_maps_errors(wire, reply, message, calls):
    wire.on(GENERATION, reply)
    with pytest.raises(ProviderError, match=message):
        DashScopeChatModel(config(wire, "chat", "qwen-plus")).complete([ChatMessage("user", "x")])
    assert len(wire.requests) == calls


def test_it_names_timeout_and_address(wire):
    wire.on(GENERATION, Reply(body=answer("late"), delay=1.5))
    with pytest.raises(ProviderError, match="TIMEOUT_CHAT"):
        DashScopeChatModel(config(wire, "chat", "qwen-plus", timeout=0.5)).complete([ChatMessage("user", "x")])
    gone = RoleConfig(
        role="chat",
        provider="dashscope",
        model="qwen-plus",
        base_url="http://127.0.0.1:1/api/v1",
        api_key="k",
        timeout=1.0,
    )
    with mock.patch("providers.retry.pause"), pytest.raises(ProviderError, match="BASE_URL_CHAT"):
        DashScopeChatModel(gone).complete([ChatMessage("user", "x")])


def test_it_needs_a_key():
    keyless = RoleConfig(role="chat", provider="dashscope", model="qwen-plus", base_url="http://127.0.0.1:1")
    with pytest.raises(ProviderError, match="no API key: set API_KEY_CHAT or DASHSCOPE_API_KEY"):
        DashScopeChatModel(keyless).complete([ChatMessage("user", "x")])


def test_it_describes_an_image_with_qwen_vl(wire):
    wire.on(
        VISION,
        Reply(
            body={
                "output": {
                    "choices": [
                        {"finish_reason": "stop", "message": {"role": "assistant", "content": [{"text": "一个红点。"}]}}
                    ]
                },
                "usage": {},
            }
        ),
    )
    text = DashScopeVisionModel(config(wire, "vision", "qwen-vl-plus")).describe(PNG, "图里是什么？")
    assert text == "一个红点。"
    content = wire.bodies(VISION)[0]["input"]["messages"][0]["content"]
    assert content == [{"image": "data:image/png;base64," + base64.b64encode(PNG).decode()}, {"text": "图里是什么？"}]


def test_it_embeds_text_in_batches_of_ten(wire):
    def rows(n: int) -> dict:
        return {
            "output": {"embeddings": [{"text_index": i, "embedding": [float(i), 1.0]} for i in reversed(range(n))]},
            "usage": {"total_tokens": n},
        }

    wire.on(EMBEDDING, Reply(body=rows(10)), Reply(body=rows(2)))
    embedder = DashScopeEmbedder(config(wire, "embedding", "text-embedding-v4", dims=2))
    vectors = embedder.embed_documents([f"段落 {n}" for n in range(12)])
    assert len(vectors) == 12
    assert vectors[:2] == [[0.0, 1.0], [1.0, 1.0]]  # put back in input order
    first, second = wire.bodies(EMBEDDING)
    assert len(first["input"]["texts"]) == 10
    assert len(second["input"]["texts"]) == 2
    assert first["parameters"] == {"dimension": 2}
    assert embedder.dims == 2


def test_it_embeds_images_and_text_in_one_space(wire):
    wire.on(
        MULTIMODAL,
        Reply(body={"output": {"embeddings": [{"index": 0, "embedding": [0.5, 0.5, 0.0], "type": "image"}]}}),
    )
    embedder = DashScopeImageEmbedder(config(wire, "image_embedding", "multimodal-embedding-v1"))
    assert embedder.embed_images([PNG]) == [[0.5, 0.5, 0.0]]
    assert embedder.embed_text("海报") == [0.5, 0.5, 0.0]
    image_body, text_body = wire.bodies(MULTIMODAL)
    assert image_body["input"]["contents"][0]["image"].startswith("data:image/png;base64,")
    assert text_body["input"]["contents"] == [{"text": "海报"}]


def test_it_reranks(wire):
    wire.on(
        RERANK,
        Reply(
            body={"output": {"results": [{"index": 1, "relevance_score": 0.93}, {"index": 0, "relevance_score": 0.08}]}}
        ),
    )
    scores = DashScopeReranker(config(wire, "rerank", "gte-rerank-v2")).score("退款", ["年会", "退款政策"])
    assert scores == [0.08, 0.93]
    body = wire.bodies(RERANK)[0]
    assert body["input"] == {"query": "退款", "documents": ["年会", "退款政策"]}
    assert body["parameters"] == {"return_documents": False, "top_n": 2}


def test_it_refuses_a_malformed_embedding_answer(wire):
    wire.on(EMBEDDING, Reply(body={"output": {"embeddings": [{"embedding": [1.0]}]}}))
    with pytest.raises(ProviderError, match="malformed response"):
        DashScopeEmbedder(config(wire, "embedding", "text-embedding-v4")).embed_documents(["a"])

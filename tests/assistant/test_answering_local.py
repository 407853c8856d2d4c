"""Answering with the offline local chat model (Qwen2.5 1.5B through llama.cpp): routing on
labelled questions, rewrites that resolve pronouns, a cited answer on the right page, a
two-document comparison, abstention, and `manage.py chat`. Slow (seconds per model call):
each test asks as little as it can."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from assistant.answering import router
from assistant.answering.pipeline import answer_events, collect, start
from providers import registry
from tests.assistant.test_answering import LEAVE, LEAVE_EN, ROUTE_CASES

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]


def test_the_local_model_routes_labelled_questions():
    model = registry.chat_model()
    decided = [
        (router.route(model, question, history).strategy, expected) for question, history, expected in ROUTE_CASES
    ]
    right = sum(got == expected for got, expected in decided)
    assert right / len(decided) >= 0.8, decided


def test_the_local_model_resolves_pronouns_from_history():
    model = registry.chat_model()
    assert "年假" in router.rewrite(model, "它可以累积吗？", LEAVE)
    assert "leave" in router.rewrite(model, "Can it be carried over to next year?", LEAVE_EN).lower()


def test_the_local_model_answers_with_a_citation_on_the_right_page(policies, alice):
    result = collect(
        answer_events(start(alice, "未休完的年假可以累积到下一年吗？最多累积几天？", collection_ids=[policies.pk]))
    )
    assert result["error"] is None
    assert result["abstain"] is False, result["answer"]
    assert ("五" in result["answer"]) or ("5" in result["answer"]), result["answer"]
    pages = {(cited["file"], cited["page"]) for cited in result["citations"]}
    assert ("policy.pdf", 2) in pages, result


def test_the_local_model_compares_across_two_documents(policies, alice):
    result = collect(
        answer_events(start(alice, "比较 Falcon 路由器和 Heron 交换机的保修期", collection_ids=[policies.pk]))
    )
    assert result["strategy"] == "multi_step", result
    assert len(result["plan"]) >= 2
    assert {cited["file"] for cited in result["citations"]} >= {"falcon.md", "heron.md"}, result


def test_the_local_model_abstains_when_the_documents_do_not_say(policies, alice):
    result = collect(answer_events(start(alice, "公司的股票代码是什么？", collection_ids=[policies.pk])))
    assert result["abstain"] is True, result["answer"]
    assert result["citations"] == []


def test_manage_py_chat_prints_strategy_answer_and_sources(policies, alice):
    out = io.StringIO()
    call_command("chat", user=alice.email, collections=[policies.pk], questions=["年假每年有几天？"], stdout=out)
    text = out.getvalue()
    assert "[direct]" in text
    assert "Sources:" in text
    assert "policy.pdf, 第 2 页" in text


def test_the_judge_and_the_answer_share_one_reading_of_the_passages(policies, alice):
    """The judge's yes/no on the answer's own prompt: the same score however often it is
    asked (a shared prefix is kept, not read wrongly), and higher where the passages answer."""
    from assistant.answering import answer as answers
    from assistant.answering import prompts
    from assistant.retrieval.search import search
    from providers.local.chat import LocalChatModel

    model = registry.chat_model()
    assert isinstance(model, LocalChatModel)

    def judged(question: str) -> float:
        hits = search(alice, question, collection_ids=[policies.pk], k=6).hits
        sources = answers.sources_of(hits)
        return model.yes_minus_no(answers.messages(question, sources, "en", closing=prompts.JUDGE["en"]))

    answered = judged("How many days of paid annual leave do employees get per year?")
    # Asked again, the prompt is read from the kept prefix: llama.cpp's batch sizes move the
    # last digits (0.881 then 0.899 seen in CI); a prefix kept wrongly moves it far more.
    assert judged("How many days of paid annual leave do employees get per year?") == pytest.approx(answered, abs=0.05)
    unanswered = judged("What is the name of the company's cafeteria chef?")
    assert answered > unanswered, (answered, unanswered)

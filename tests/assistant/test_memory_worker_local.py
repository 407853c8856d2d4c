"""Memory end to end with the offline local chat model (Qwen2.5 1.5B) and a real Celery memory
worker (issue 19): a preference stated in one conversation is extracted by the worker, a
document question stores nothing, a later conversation's answer is given the memory and
follows it, and another user never sees any of it. Slow: one extraction, two answers."""

from __future__ import annotations

import pytest

from assistant.answering.events import AnswerDelta, MemoryUsed, only
from assistant.answering.pipeline import answer_events, start
from assistant.memory.service import memories
from assistant.models import Conversation, Message
from assistant.tasks import remember_turn
from portal.supervisor import MEMORY_QUEUE, worker_command
from tests.stack import process, wait_for

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("media")]


def turn(user, question: str, answer: str) -> int:
    """An answered turn, as the answer pipeline stores it; the id of its answer."""
    conversation = Conversation.objects.create(user=user, title=question[:40])
    Message.objects.create(conversation=conversation, role=Message.Role.USER, content=question)
    return Message.objects.create(conversation=conversation, role=Message.Role.ASSISTANT, content=answer).pk


def test_a_preference_stated_once_is_followed_later_and_only_for_its_owner(policies, alice, bob, tmp_path):
    store = memories()
    log = tmp_path / "memory-worker.log"
    with process(worker_command("memory-local@%h", 1, MEMORY_QUEUE), log) as worker:
        wait_for(lambda: b"ready." in log.read_bytes() or worker.poll() is not None, 120, "worker start", log)
        remember_turn.delay(turn(alice, "年假有几天？", "正式员工每年有十天年假 [1]。"))
        remember_turn.delay(turn(alice, "以后请用表格形式回答我的问题。", "好的。"))
        wait_for(lambda: store.all(alice), 300, "the memory of the preference", log)
    texts = [item.text for item in store.all(alice)]
    assert len(texts) == 1, texts  # the document question stored nothing
    assert "表格" in texts[0], texts
    assert not texts[0].startswith("用户询问"), texts

    events = list(answer_events(start(alice, "我喜欢什么形式的回答？", collection_ids=[policies.pk])))
    (used,) = [event.memories for event in only(events, MemoryUsed)]
    assert any("表格" in memory["text"] for memory in used), used
    answer = "".join(event.text for event in only(events, AnswerDelta))
    assert "表格" in answer, answer

    theirs = list(answer_events(start(bob, "我喜欢什么形式的回答？", collection_ids=None)))
    assert [event.memories for event in only(theirs, MemoryUsed)] == [[]]
    assert store.search(bob, "表格形式的回答") == []

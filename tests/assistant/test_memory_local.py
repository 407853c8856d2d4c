"""Memory with the offline local chat model (Qwen2.5 1.5B) doing mem0's extraction: a
Chinese preference stated in one conversation is extracted in Chinese and recalled, by the
question of a later conversation, before that answer is written. Slow: one extraction and
one routing."""

from __future__ import annotations

import pytest

from assistant.answering.events import MemoryUsed, only
from assistant.answering.pipeline import answer_events, start
from assistant.memory.service import memories
from tests.conftest import make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]


def test_a_chinese_preference_is_extracted_and_recalled_in_a_later_conversation(policies, alice):
    store = memories()
    first = start(alice, "以后请用表格形式回答我的问题。年假有几天？", collection_ids=[policies.pk])
    remembered = store.remember(alice, first.question, conversation=first.conversation.pk)
    texts = [item.text for item in remembered.items]
    assert any("表格" in text for text in texts), texts
    assert all(any("\u4e00" <= char <= "\u9fff" for char in text) for text in texts), texts  # kept in Chinese

    later = start(alice, "我喜欢什么形式的回答？", collection_ids=[policies.pk])
    assert later.conversation.pk != first.conversation.pk
    events = answer_events(later)
    used = next(event.memories for event in only(events, MemoryUsed))
    events.close()  # what the answer says is the answering tests' business
    assert any("表格" in memory["text"] for memory in used), used

    stranger = make_user("stranger")
    assert store.search(stranger, "我喜欢什么形式的回答？") == []

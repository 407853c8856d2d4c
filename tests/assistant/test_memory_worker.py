"""Memory extraction stays out of the way (issue 19): it waits while a local-model answer is
being written (marked in the real Redis) or an ingestion is queued or running (in the real
database), and a turn that says nothing about the user queues no task and asks no model."""

from __future__ import annotations

import time

import pytest
from django.conf import settings

from assistant import busy
from assistant.answering.pipeline import answer_events, start
from assistant.memory.service import memories
from assistant.models import Conversation, Message
from assistant.tasks import remember_turn
from ingestion.models import IngestionRun
from portal.celery import app
from providers import registry
from tests.assistant.test_answering import ScriptedChat
from tests.assistant.test_memory import Extractor
from tests.conftest import make_collection

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def clean_marks():
    client = busy._client(settings.REDIS_URL)
    client.delete(busy.ANSWERING)
    yield
    client.delete(busy.ANSWERING)


def test_an_answer_in_progress_makes_the_machine_busy_until_it_ends():
    assert busy.busy() == ""
    mark = busy.Answering()
    assert busy.answers_in_progress() == 1
    assert "answer" in busy.busy()
    mark.end()
    assert busy.busy() == ""


def test_the_mark_of_an_answer_whose_process_died_lapses():
    busy._client(settings.REDIS_URL).zadd(busy.ANSWERING, {"dead-process": time.time() - 1})
    assert busy.answers_in_progress() == 0


def test_extraction_waits_for_a_queued_ingestion_then_goes_when_it_is_done(alice):
    run = IngestionRun.objects.create(collection=make_collection(alice))
    assert "ingestion" in busy.busy()
    assert busy.wait_until_idle(0.5, poll=0.1) >= 0.5  # gave up waiting: runs anyway
    # A worker serving the ingest queue too would wait for a run queued behind itself.
    assert busy.wait_until_idle(5, poll=0.1, ingestion=False) < 0.5
    run.status = IngestionRun.Status.SUCCEEDED
    run.save(update_fields=["status"])
    assert busy.wait_until_idle(5, poll=0.1) < 0.5


def test_a_run_with_no_sign_of_life_holds_nobody_up(alice, settings):
    run = IngestionRun.objects.create(collection=make_collection(alice), status=IngestionRun.Status.RUNNING)
    IngestionRun.objects.filter(pk=run.pk).update(created_at=run.created_at.replace(year=2000))
    assert busy.ingestions_pending() == 0


def test_a_document_question_queues_no_memory_task_and_a_statement_does(alice, policies, monkeypatch):
    queued: list[int] = []

    def send_now(task_name: str, message_id: int) -> None:
        assert task_name == remember_turn.name
        queued.append(message_id)

    monkeypatch.setattr("assistant.answering.pipeline.send_now", send_now)
    monkeypatch.setattr("django.db.transaction.on_commit", lambda callback, **kwargs: callback())
    model = ScriptedChat(route='{"strategy": "direct", "reason": "x"}', answer="文档中没有找到答案。")

    for question in ("年假有几天？", "我想知道报销要多久？"):
        list(answer_events(start(alice, question, collection_ids=[policies.pk]), model=model))
    assert queued == []
    list(answer_events(start(alice, "我在西安办公室工作。年假有几天？", collection_ids=[policies.pk]), model=model))
    assert len(queued) == 1


def test_the_memory_task_goes_to_its_own_queue():
    assert app.amqp.router.route({}, remember_turn.name)["queue"].name == "memory"


def test_the_task_itself_refuses_a_turn_with_nothing_about_the_user(alice, monkeypatch):
    model = Extractor('{"memory": []}')
    monkeypatch.setitem(registry._instances, "chat", model)
    conversation = Conversation.objects.create(user=alice, title="leave")
    Message.objects.create(conversation=conversation, role="user", content="年假有几天？")
    answer = Message.objects.create(conversation=conversation, role="assistant", content="十天 [1]。")
    assert remember_turn.apply(args=(answer.pk,)).get() is None
    assert model.asked == []
    assert memories().all(alice) == []

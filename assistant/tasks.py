"""Thin Celery wrappers (Saleor's style): ids in, assistant.memory does the work."""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from assistant.busy import wait_until_idle
from assistant.memory.gate import gate
from assistant.memory.service import MemoryUnavailable, memories
from assistant.models import Message

log = logging.getLogger(__name__)


# A database that refuses or drops a connection (a restart, "too many clients" under load:
# bench/load.py lost a memory card to it) is tried again, 3 times with backoff. The task runs
# on the `memory` queue (its own worker: an upload never waits behind it) and waits until no
# answer is being written by the local model and no ingestion is queued or running.
@shared_task(
    name="assistant.remember_turn",
    acks_late=True,
    ignore_result=True,
    autoretry_for=(OperationalError, InterfaceError, psycopg.OperationalError),
    retry_backoff=5,
    retry_backoff_max=120,
    max_retries=3,
)
def remember_turn(message_id: int) -> dict[str, Any] | None:
    """What the user said in an answered turn becomes memories of that user (off the answer's path)."""
    answer = (
        Message.objects.select_related("conversation__user").filter(pk=message_id, role=Message.Role.ASSISTANT).first()
    )
    if answer is None or not answer.content or answer.error:
        return None  # deleted meanwhile, or nothing was answered
    question = (
        Message.objects.filter(conversation_id=answer.conversation_id, role=Message.Role.USER, pk__lt=answer.pk)
        .order_by("-pk")
        .first()
    )
    if question is None or not gate(question.content).keep:
        return None
    try:
        store = memories()
    except MemoryUnavailable as exc:
        log.warning("Not remembering message %s: %s", message_id, exc)
        return None
    # A worker that also serves the ingest queue (one worker for everything) would wait for
    # ingestion queued behind this very task: there, wait for answers only.
    serves_ingest = "ingest" in remember_turn.app.amqp.queues.consume_from
    waited = wait_until_idle(settings.MEMORY_IDLE_WAIT, ingestion=not serves_ingest)
    remembered = store.remember(
        answer.conversation.user, question.content, conversation=answer.conversation_id, message=answer.pk
    )
    return {
        "stored": len(remembered.items),
        "inferred": remembered.inferred,
        "updated": len(remembered.updated),
        "deleted": len(remembered.deleted),
        "waited": round(waited, 1),
    }

"""Events about a collection, sent to everyone watching /ws/collections/<id>/."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from redis.exceptions import RedisError

log = logging.getLogger(__name__)


def collection_group(collection_id: int) -> str:
    return f"collection-{collection_id}"


def send_collection_event(collection_id: int, event: dict[str, Any]) -> None:
    """Send now; `event` must survive json.dumps and carry a "type"."""
    layer = get_channel_layer()
    assert layer is not None
    async_to_sync(layer.group_send)(collection_group(collection_id), {"type": "collection.event", "event": event})


def send_collection_event_on_commit(collection_id: int, event: dict[str, Any]) -> None:
    """Send once the surrounding transaction commits (Zulip's send_event_on_commit). While
    Redis is unreachable the event is dropped with a warning: watchers miss an update, but
    the work it reports (an ingestion run) goes on instead of failing."""
    transaction.on_commit(lambda: _send_or_warn(collection_id, event))


def _send_or_warn(collection_id: int, event: dict[str, Any]) -> None:
    try:
        send_collection_event(collection_id, event)
    except (RedisError, OSError) as exc:
        log.warning("Collection %s: %s event not sent: %s", collection_id, event.get("type"), exc)

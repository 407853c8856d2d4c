"""Events about a collection, sent to everyone watching /ws/collections/<id>/."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction


def collection_group(collection_id: int) -> str:
    return f"collection-{collection_id}"


def send_collection_event(collection_id: int, event: dict[str, Any]) -> None:
    """Send now; `event` must survive json.dumps and carry a "type"."""
    layer = get_channel_layer()
    assert layer is not None
    async_to_sync(layer.group_send)(collection_group(collection_id), {"type": "collection.event", "event": event})


def send_collection_event_on_commit(collection_id: int, event: dict[str, Any]) -> None:
    """Send once the surrounding transaction commits (Zulip's send_event_on_commit)."""
    transaction.on_commit(lambda: send_collection_event(collection_id, event))

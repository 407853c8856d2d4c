"""/ws/collections/<id>/: live events about one collection (ingestion progress, changes).

Close codes: 4401 not logged in, 4404 no such collection for this user (also when it
exists but is not visible: no existence leak).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.http import Http404

from knowledge.access import access_collection
from knowledge.events import collection_group

log = logging.getLogger(__name__)


class CollectionEventsConsumer(AsyncJsonWebsocketConsumer):
    group: str | None = None
    staying: asyncio.Future[None] | None = None

    async def connect(self) -> None:
        # Accept first, then close with a code: a close during the handshake reaches the
        # client only as a bare HTTP 403, and clients need to tell "log in" from "not found".
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        collection_id = self.scope["url_route"]["kwargs"]["collection_id"]
        try:
            collection = await database_sync_to_async(access_collection)(user, collection_id)
        except Http404:
            await self.close(code=4404)
            return
        self.group = collection_group(collection.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        self.staying = asyncio.ensure_future(self._stay_in_group(self.group))
        await self.send_json({"type": "subscribed", "collection": collection.pk})

    async def _stay_in_group(self, group: str) -> None:
        """Join again before the membership expires (settings.GROUP_EXPIRY)."""
        while True:
            await asyncio.sleep(settings.GROUP_REFRESH)
            try:
                await self.channel_layer.group_add(group, self.channel_name)
            except Exception:  # Redis away for a moment: the next round tries again
                log.warning("Could not renew the socket's place in %s", group, exc_info=True)

    async def disconnect(self, code: int) -> None:
        if self.staying is not None:
            self.staying.cancel()
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        # Clients only listen here; a ping keeps proxies from closing an idle socket.
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})

    async def collection_event(self, message: dict[str, Any]) -> None:
        await self.send_json(message["event"])

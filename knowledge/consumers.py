"""/ws/collections/<id>/: live events about one collection (ingestion progress, changes).

Close codes: 4401 not logged in, or no longer (the user was deactivated, or the API token
the socket was opened with was revoked); 4404 no such collection for this user (also when
it exists but is not visible: no existence leak), also when it stops being visible while
the socket is open (the user left the team, the collection was deleted).

Access is checked on connect and again whenever it may have been taken away
(knowledge/revocation.py): before each event is forwarded when the user's access
generation has moved, at once when an `access.changed` message arrives on the user's
access group, and every GROUP_REFRESH seconds regardless, in case Redis missed the
announcement. A socket that lost access gets no further event and is closed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.http import Http404

from common import jsonlimits
from knowledge.access import access_collection
from knowledge.events import collection_group
from knowledge.revocation import access_group, generation_at_connect, read_generation, still_signed_in

log = logging.getLogger(__name__)
LOGGED_OUT, NOT_FOUND = 4401, 4404


def lost_access(user_id: int, token_id: int | None, collection_id: int) -> int | None:
    """The close code when the socket may no longer watch the collection, else None."""
    user = still_signed_in(user_id, token_id)
    if user is None:
        return LOGGED_OUT
    try:
        access_collection(user, collection_id)
    except Http404:
        return NOT_FOUND
    return None


class CollectionEventsConsumer(AsyncJsonWebsocketConsumer):
    groups_joined: tuple[str, ...] = ()
    staying: asyncio.Future[None] | None = None
    closed = False
    # The access generation the last check saw; None: unknown (Redis unreadable), check again.
    seen: int | None = None

    async def connect(self) -> None:
        # Accept first, then close with a code: a close during the handshake reaches the
        # client only as a bare HTTP 403, and clients need to tell "log in" from "not found".
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=LOGGED_OUT)
            return
        self.user_id: int = user.pk
        self.token_id: int | None = self.scope.get("token_id")
        collection_id = self.scope["url_route"]["kwargs"]["collection_id"]
        # The generation read before the user was last checked (portal/ws_auth.py), else now,
        # before the check below: a change committed after the check moves it.
        self.seen = await generation_at_connect(self.scope, self.user_id)
        try:
            collection = await database_sync_to_async(access_collection)(user, collection_id)
        except Http404:
            await self.close(code=NOT_FOUND)
            return
        self.collection_id: int = collection.pk
        self.groups_joined = (collection_group(collection.pk), access_group(self.user_id))
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        self.staying = asyncio.ensure_future(self._stay_in_groups())
        await self.send_json({"type": "subscribed", "collection": collection.pk})

    async def _stay_in_groups(self) -> None:
        """Join again before the membership expires (settings.GROUP_EXPIRY), only while the
        socket may still watch the collection: this check also catches an access change
        whose announcement was lost."""
        while not self.closed:
            await asyncio.sleep(settings.GROUP_REFRESH)
            try:
                if not await self._still_allowed(force=True):
                    return
                for group in self.groups_joined:
                    await self.channel_layer.group_add(group, self.channel_name)
            except Exception:  # Redis or the database away for a moment: the next round tries again
                log.warning("Could not renew the socket's place in %s", self.groups_joined, exc_info=True)

    async def _still_allowed(self, *, force: bool = False) -> bool:
        """Whether the socket may go on; closes it when not. The database is asked only when
        the access generation moved (or could not be read), or with `force`."""
        if self.closed:
            return False
        current = await read_generation(self.user_id)
        if not force and current is not None and current == self.seen:
            return True
        code = await database_sync_to_async(lost_access)(self.user_id, self.token_id, self.collection_id)
        if code is not None:
            await self._shut(code)
            return False
        self.seen = current
        return True

    async def _shut(self, code: int) -> None:
        """Close for lost access: leave the groups first so that nothing more is delivered."""
        if self.closed:
            return
        self.closed = True
        log.info("Collection socket of user %s closed (%s): access was taken away", self.user_id, code)
        await self.close(code=code)
        await self._leave()

    async def _leave(self) -> None:
        if self.staying is not None and self.staying is not asyncio.current_task():
            self.staying.cancel()
        groups, self.groups_joined = self.groups_joined, ()
        for group in groups:
            try:
                await self.channel_layer.group_discard(group, self.channel_name)
            except Exception:  # Redis away: the membership expires by itself (GROUP_EXPIRY)
                log.warning("Could not leave %s", group, exc_info=True)

    async def disconnect(self, code: int) -> None:
        self.closed = True
        await self._leave()

    @classmethod
    async def decode_json(cls, text_data: str) -> Any:
        try:
            return jsonlimits.loads(text_data)
        except ValueError:  # not JSON, or nested too deep: ignored, as any message but a ping
            return None

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        # Clients only listen here; a ping keeps proxies from closing an idle socket.
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})

    async def collection_event(self, message: dict[str, Any]) -> None:
        if await self._still_allowed():
            await self.send_json(message["event"])

    async def access_changed(self, message: dict[str, Any]) -> None:
        """Sent by knowledge.revocation when the user's access may have shrunk."""
        if self.token_id is not None and self.token_id in message.get("tokens", ()):
            await self._shut(LOGGED_OUT)
        else:
            await self._still_allowed(force=True)

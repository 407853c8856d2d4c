"""Websocket authentication: the session cookie, or `Authorization: Token <key>` for
integrations (the same keys as the REST API)."""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware

from knowledge.api.authentication import key_from_header, user_for_key


@database_sync_to_async
def _user_for_header(value: str) -> Any:
    key = key_from_header(value)
    found = user_for_key(key) if key else None
    return found[0] if found else None


class TokenAuthMiddleware(BaseMiddleware):
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        headers = dict(scope.get("headers", []))
        header = headers.get(b"authorization")
        if header:
            user = await _user_for_header(header.decode("latin-1"))
            if user is not None:
                scope = {**scope, "user": user}
        return await super().__call__(scope, receive, send)


def PortalAuthStack(inner: Any) -> Any:  # noqa: N802 (named like Channels' own stacks)
    return AuthMiddlewareStack(TokenAuthMiddleware(inner))

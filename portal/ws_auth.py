"""Websocket authentication: the session cookie, or `Authorization: Token <key>` for
integrations (the same keys as the REST API).

What a socket needs later to notice that its access was taken away (knowledge/revocation.py)
is put in its scope: `token_id`, the id of the API token it was opened with (absent for a
session), and `access_generation`, the user's access generation read *before* the last
check of the user in the database, so that a change committed after that check is seen as
a moved generation and none slips between authentication and the consumer's first look.
"""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from django.contrib.auth.models import AnonymousUser

from knowledge.api.authentication import key_from_header, user_for_key
from knowledge.revocation import read_generation, still_signed_in


@database_sync_to_async
def _user_for_header(value: str) -> tuple[Any, int] | None:
    """The user and the token's id, or None."""
    key = key_from_header(value)
    found = user_for_key(key) if key else None
    return (found[0], found[1].pk) if found else None


class TokenAuthMiddleware(BaseMiddleware):
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        headers = dict(scope.get("headers", []))
        header = headers.get(b"authorization")
        if header:
            found = await _user_for_header(header.decode("latin-1"))
            if found is not None:
                scope = {**scope, "user": found[0], "token_id": found[1]}
        return await super().__call__(scope, receive, send)


class AccessGenerationMiddleware(BaseMiddleware):
    """Reads the user's access generation, then checks the user (and token) again."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        user = scope.get("user")
        if user is not None and user.is_authenticated:
            seen = await read_generation(user.pk)
            token_id = scope.get("token_id")
            fresh = await database_sync_to_async(still_signed_in)(user.pk, token_id)
            if fresh is None:  # deactivated or revoked meanwhile: not logged in (4401)
                scope = {key: value for key, value in scope.items() if key != "token_id"}
                scope["user"] = AnonymousUser()
            else:
                scope = {**scope, "user": fresh, "access_generation": seen}
        return await super().__call__(scope, receive, send)


def PortalAuthStack(inner: Any) -> Any:  # noqa: N802 (named like Channels' own stacks)
    return AuthMiddlewareStack(TokenAuthMiddleware(AccessGenerationMiddleware(inner)))

"""Telling open websockets that what a user may see has changed.

Access is checked when a socket connects; after that, a removed member, a lowered role, a
deleted collection or a revoked token must not keep receiving anything. Two things make
that immediate and cheap:

- every user has an **access generation** in Redis, raised (on commit) by every action that
  can take access away; a socket remembers the generation its last check saw and checks
  again, in the database, only when it has moved: one Redis GET before each event it
  forwards, a query only after a change;
- the change is also **pushed** to the user's sockets (the channel group `access-<user id>`)
  so that an idle socket closes within seconds, without waiting for its next event.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import cache
from typing import Any, cast

import redis
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models.signals import post_save, pre_save
from redis.exceptions import RedisError

from knowledge.models import ApiToken
from knowledge.principal import carry_token
from portal.typing import AnyUser

log = logging.getLogger(__name__)
PREFIX = "portal:access"


def access_group(user_id: int) -> str:
    return f"access-{user_id}"


@cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2)


def generation(user_id: int) -> int:
    """The user's access generation now (0 until anything changed)."""
    value = _client(settings.REDIS_URL).get(f"{PREFIX}:{user_id}")
    return int(value or 0)


async def read_generation(user_id: int) -> int | None:
    """`generation` for a socket's event loop (the GET runs in a thread); None while Redis
    cannot be read: the caller then checks in the database instead."""
    try:
        return await sync_to_async(generation, thread_sensitive=False)(user_id)
    except (RedisError, OSError) as exc:
        log.warning("Access generation of user %s not read: %s", user_id, exc)
        return None


async def generation_at_connect(scope: dict[str, Any], user_id: int) -> int | None:
    """The generation a socket starts from: the one portal/ws_auth.py read before it last
    checked the user (so that a change committed after that check shows), else now."""
    if "access_generation" in scope:
        return cast(int | None, scope["access_generation"])
    return await read_generation(user_id)


def still_signed_in(user_id: int, token_id: int | None = None) -> AnyUser | None:
    """The user as the database has them now, if still active and (for a socket opened with
    an API token) the token is not revoked, carrying that token and so its limits
    (knowledge/principal.py); None when the socket must close (4401)."""
    if token_id is not None:  # active(): not revoked, and its user active
        token = ApiToken.objects.active().select_related("user").filter(pk=token_id, user_id=user_id).first()
        return carry_token(token.user, token) if token is not None else None
    user: AnyUser | None = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    return user


def access_changed(user_ids: Iterable[int | None], *, token_ids: Iterable[int] = ()) -> None:
    """Once the surrounding transaction commits: raise each user's generation and tell their
    open sockets to check again (`token_ids`: sockets opened with these tokens close)."""
    users = sorted({pk for pk in user_ids if pk is not None})
    tokens = sorted(set(token_ids))
    if users:
        transaction.on_commit(lambda: _announce(users, tokens))


def _announce(user_ids: list[int], token_ids: list[int]) -> None:
    try:
        pipe = _client(settings.REDIS_URL).pipeline()
        for pk in user_ids:
            pipe.incr(f"{PREFIX}:{pk}")
        pipe.execute()
        layer = get_channel_layer()
        if layer is None:
            return
        for pk in user_ids:
            message = {"type": "access.changed", "tokens": token_ids}
            async_to_sync(layer.group_send)(access_group(pk), message)
    except (RedisError, OSError) as exc:
        # The sockets' own checks still run when Redis is back (the generation is read then).
        log.warning("Access change of users %s not announced: %s", user_ids, exc)


def connect() -> None:
    """Announce a deactivated account (the admin, `manage.py`, any save of `is_active`):
    its open sockets close within seconds like those of a removed member."""
    user_model = get_user_model()
    pre_save.connect(_note_active, sender=user_model, dispatch_uid="revocation-active-before")
    post_save.connect(_announce_deactivation, sender=user_model, dispatch_uid="revocation-active-after")


def _note_active(sender: type, instance: AnyUser, update_fields: object = None, **kwargs: object) -> None:
    if update_fields is not None and "is_active" not in update_fields:  # type: ignore[operator]
        return  # a login's last_login, a password change: no extra query
    pk = getattr(instance, "pk", None)
    was = sender._default_manager.filter(pk=pk).values_list("is_active", flat=True).first() if pk else None  # type: ignore[attr-defined]
    instance._was_active = was  # type: ignore[union-attr]


def _announce_deactivation(sender: type, instance: AnyUser, created: bool, **kwargs: object) -> None:
    if not created and getattr(instance, "_was_active", None) and not instance.is_active:
        access_changed([instance.pk])

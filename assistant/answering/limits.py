"""Questions per user per minute, counted in Redis so that every web process shares the count
(websocket and HTTP together)."""

from __future__ import annotations

import time
from functools import cache

import redis
from django.conf import settings


@cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2)


def allow_question(user_id: int) -> bool:
    """Count one question; False when the user is over PORTAL_ASK_RATE_PER_MINUTE this minute."""
    key = f"portal:asks:{user_id}:{int(time.time() // 60)}"
    client = _client(settings.REDIS_URL)
    pipe = client.pipeline()
    pipe.incr(key)
    pipe.expire(key, 120)
    count, _ = pipe.execute()
    return int(count) <= settings.ASK_RATE_PER_MINUTE

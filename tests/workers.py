"""A pytest plugin loaded before Django's settings (`scripts/test` passes `-p tests.workers`):
under pytest-xdist, each worker process gets a Redis database of its own, as pytest-django
gives it a test database of its own (test_<name>_gw0, _gw1…). Django's cache, the channel
layer, rate counts and Celery's broker are in Redis, and one worker's `cache.clear()` between
tests must not empty the other's. Each worker also keeps its own var folder (a source's Git
copy is kept there by its id, and both workers' first source has id 1). The settings read
both once, so they are changed here, when the worker starts, before they are imported."""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def worker_redis_url(url: str, worker: str) -> str:
    """`url` moved to database (its own + the worker's number): gw0 keeps it, gw1 the next…"""
    number = int(worker.removeprefix("gw"))
    parts = urlsplit(url)
    if parts.scheme == "unix":  # unix:///path/redis.sock?db=N, as the embedded Redis is given
        query = dict(parse_qsl(parts.query))
        query["db"] = str(int(query.get("db", "0")) + number)
        return f"unix://{parts.path}?{urlencode(query)}"  # urlunsplit would drop the empty host
    database = int(parts.path.strip("/") or "0")
    return urlunsplit(parts._replace(path=f"/{database + number}"))


_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker and os.environ.get("REDIS_URL"):
    os.environ["REDIS_URL"] = worker_redis_url(os.environ["REDIS_URL"], _worker)
if _worker and os.environ.get("PORTAL_VAR_DIR"):
    os.environ["PORTAL_VAR_DIR"] = os.path.join(os.environ["PORTAL_VAR_DIR"], _worker)

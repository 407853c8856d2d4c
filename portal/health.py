"""Status of the services the portal needs, for /healthz and `manage.py up`."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any

import redis
from django.conf import settings
from django.db import connection

from common.storage import is_object_store
from portal.env import redact_url

HEARTBEAT_KEY = "portal:worker-heartbeat"


@dataclass(frozen=True)
class Status:
    ok: bool
    detail: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@cache
def redis_client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=3, socket_connect_timeout=3)


def database_unreachable() -> str | None:
    """Why the database cannot be reached, naming the setting to fix; None when it answers."""
    try:
        connection.ensure_connection()
    except Exception as exc:  # any driver error is a "down" to report, not to raise
        return _unreachable("DATABASE_URL", settings.DATABASE_URL, settings.DATABASE_URL_SOURCE, exc)
    return None


def database_status() -> Status:
    problem = database_unreachable()
    if problem:
        return Status(False, problem)
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
    if row is None:
        return Status(False, "connected, but the pgvector extension is not installed: run `manage.py migrate`")
    return Status(True, f"PostgreSQL with pgvector {row[0]}")


def redis_status() -> Status:
    try:
        redis_client().ping()
    except redis.RedisError as exc:
        return Status(False, _unreachable("REDIS_URL", settings.REDIS_URL, settings.REDIS_URL_SOURCE, exc))
    return Status(True, "Redis answers")


def worker_status(timeout: float = 1.0) -> Status:
    from portal.celery import app

    try:
        replies = app.control.ping(timeout=timeout)
    except Exception as exc:  # a broker error: Redis' own status says more
        return Status(False, f"cannot ask workers: {exc}")
    if not replies:
        return Status(False, "no Celery worker answered; start one with `celery -A portal worker`")
    names = sorted(name for reply in replies for name in reply)
    beat = _heartbeat_age()
    suffix = f"; last beat heartbeat {beat:.0f} s ago" if beat is not None else ""
    return Status(True, f"{len(names)} worker(s): {', '.join(names)}{suffix}")


def _heartbeat_age() -> float | None:
    try:
        raw = redis_client().get(HEARTBEAT_KEY)
    except redis.RedisError:
        return None
    return time.time() - float(raw) if raw else None


def _unreachable(variable: str, url: str, source: str, exc: Exception) -> str:
    where = f"{variable}={redact_url(url)}" if source == variable else f"the embedded server ({redact_url(url)})"
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    hint = "" if source == variable else f"; {variable} is not set: start the portal with `manage.py up`"
    return f"cannot reach {where}: {first_line}{hint}"


def storage_status() -> Status | None:
    """Whether the object store holding the portal's files answers, with the bucket there and
    the keys accepted; None with PORTAL_STORAGE=local (the local disk needs no check).
    One HeadBucket with the storage's own short timeouts (PORTAL_S3_TIMEOUT, 2 attempts)."""
    from django.core.files.storage import default_storage

    if not is_object_store(default_storage):
        return None
    problem = storage_unreachable()
    if problem:
        return Status(False, problem)
    store: Any = default_storage
    return Status(True, f"bucket {store.bucket_name!r} at {_endpoint(store)} answers")


def storage_unreachable() -> str | None:
    """Why the S3 bucket cannot be used, naming the setting to fix; None when it answers or
    files are on the local disk."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
    from django.core.files.storage import default_storage

    if not is_object_store(default_storage):
        return None
    store: Any = default_storage
    try:
        store.connection.meta.client.head_bucket(Bucket=store.bucket_name)
    except ClientError as exc:
        return _refused(store, exc)
    except NoCredentialsError:
        return "no S3 keys: set PORTAL_S3_ACCESS_KEY_ID and PORTAL_S3_SECRET_ACCESS_KEY"
    except BotoCoreError as exc:  # could not connect, timed out, bad endpoint
        return f"cannot reach the object store at PORTAL_S3_ENDPOINT_URL={_endpoint(store)}: {exc}"
    return None


def _refused(store: Any, exc: Exception) -> str:
    """A HeadBucket the store answered with an error (its status: a HEAD has no body)."""
    response = getattr(exc, "response", {}) or {}
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    code = response.get("Error", {}).get("Code", "")
    bucket, endpoint = store.bucket_name, _endpoint(store)
    if status == 404 or code in ("404", "NoSuchBucket", "NotFound"):
        return (
            f"the bucket {bucket!r} (PORTAL_S3_BUCKET) does not exist at PORTAL_S3_ENDPOINT_URL={endpoint}: "
            "create it, or fix the name"
        )
    if status in (401, 403) or code in ("403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied"):
        return (
            f"the object store at {endpoint} refused the keys for bucket {bucket!r}: check "
            "PORTAL_S3_ACCESS_KEY_ID and PORTAL_S3_SECRET_ACCESS_KEY, "
            "and that the key may read and write PORTAL_S3_BUCKET"
        )
    return f"the object store at PORTAL_S3_ENDPOINT_URL={endpoint} answered {status} {code} for bucket {bucket!r}"


def _endpoint(store: Any) -> str:
    return redact_url(store.endpoint_url) if store.endpoint_url else "AWS S3"

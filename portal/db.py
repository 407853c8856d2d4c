"""Database settings that depend on the process a connection is made in."""

from __future__ import annotations

from typing import Any

from django.conf import settings


def limit_web_statements(sender: Any, connection: Any, **kwargs: Any) -> None:
    """A `connection_created` receiver for the web process: PostgreSQL cancels any statement
    of a web request that runs longer than PORTAL_WEB_STATEMENT_TIMEOUT seconds (the
    request then fails with a clear error instead of holding a worker thread)."""
    seconds = settings.WEB_STATEMENT_TIMEOUT
    if seconds and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"SET statement_timeout = {int(seconds) * 1000}")


def no_persistent_connections() -> None:
    """For the web process, before its first query. Django keeps a connection per thread, and
    under ASGI each request's sync code runs in a thread of its own, so connections kept for
    DB_CONN_MAX_AGE piled up with every burst of requests: bench/load.py (50 chats and 10
    uploads) saw 90 held at once, then PostgreSQL's "too many clients" and 500s. Django's
    docs: disable persistent connections under ASGI. Workers and commands keep theirs."""
    for database in settings.DATABASES.values():
        database["CONN_MAX_AGE"] = 0

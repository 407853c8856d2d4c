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

"""Database settings that depend on the process a connection is made in."""

from __future__ import annotations

from typing import Any


def for_the_web(databases: dict[str, dict[str, Any]], statement_timeout: int) -> None:
    """The web process's connections, set before its first query (Django reads a database's
    settings when it connects):

    - none is kept between requests. Django keeps a connection per thread, and under ASGI each
      request's sync code runs in a thread of its own, so connections kept for DB_CONN_MAX_AGE
      piled up with every burst of requests: bench/load.py (50 chats and 10 uploads) saw 90
      held at once, then PostgreSQL's "too many clients" and 500s. Django's docs: disable
      persistent connections under ASGI.
    - PostgreSQL cancels any statement running longer than `statement_timeout` seconds
      (PORTAL_WEB_STATEMENT_TIMEOUT; 0: never), so a request fails with a clear error instead
      of holding a thread. It is a connection option: no extra round trip per connection.

    Workers and commands keep their connections and have no statement limit (index builds
    and statistics may take longer)."""
    for database in databases.values():
        database["CONN_MAX_AGE"] = 0
        if statement_timeout and database["ENGINE"] == "django.db.backends.postgresql":
            options = database.setdefault("OPTIONS", {})
            limit = f"-c statement_timeout={int(statement_timeout) * 1000}"
            options["options"] = f"{options.get('options', '')} {limit}".strip()

"""mem0's history in the portal's PostgreSQL: each memory's change log (ADD, UPDATE, DELETE)
and mem0's copy of each scope's last messages, in the tables memory_history and
memory_messages (assistant.models.MemoryHistory, MemoryMessage; created by migrations), not
in the SQLite file MEM0_DIR/history.db that mem0 would open. Every web and worker process,
on any machine, then reads and writes the same history.

- PostgresHistory: mem0's SQLiteManager interface (add_history, batch_add_history,
  get_history, save_messages, get_last_messages, reset, close) on those tables, through the
  memory store's own connection pool (the one the memories are written with: each call its
  own short transaction, safe from any thread, never inside a request's transaction).
- PortalMemory: mem0's Memory with PostgresHistory in place of SQLiteManager, also after
  mem0's reset() (which opens a new SQLiteManager).
- import_sqlite: the one-time move of an existing history.db into the tables (idempotent:
  mem0's row ids are kept, a second run adds nothing; the file is then renamed
  history.db.imported so that no process reads it again).
- erase / erase_sqlite: a purge's deletion of a user's history rows.
"""

from __future__ import annotations

import logging
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, closing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from mem0 import Memory

log = logging.getLogger(__name__)

HISTORY_TABLE = "memory_history"  # assistant.models.MemoryHistory
MESSAGES_TABLE = "memory_messages"  # assistant.models.MemoryMessage
KEPT_MESSAGES = 10  # per scope, as mem0 keeps them
# What mem0 is given as its history path: an in-memory SQLite database, closed at once and
# never a file (mem0's Memory opens SQLiteManager(history_db_path) before the portal can
# replace it).
NO_FILE = ":memory:"
IMPORTED_SUFFIX = ".imported"
BATCH = 500

HISTORY_COLUMNS = (
    "id",
    "memory_id",
    "old_memory",
    "new_memory",
    "event",
    "created_at",
    "updated_at",
    "is_deleted",
    "actor_id",
    "role",
)
MESSAGE_COLUMNS = ("id", "session_scope", "role", "content", "name", "created_at")


class PostgresHistory:
    """mem0's SQLiteManager, on the portal's PostgreSQL. `cursors(commit=...)` is the memory
    store's `_get_cursor`: a connection from its pool, committed (or rolled back) at exit."""

    db_path = None  # no file (mem0's SQLiteManager has its path here)

    def __init__(self, cursors: Callable[..., AbstractContextManager[Any]]) -> None:
        self._cursors = cursors

    def add_history(
        self,
        memory_id: str,
        old_memory: str | None,
        new_memory: str | None,
        event: str,
        *,
        created_at: str | None = None,
        updated_at: str | None = None,
        is_deleted: int = 0,
        actor_id: str | None = None,
        role: str | None = None,
    ) -> None:
        record = {
            "memory_id": memory_id,
            "old_memory": old_memory,
            "new_memory": new_memory,
            "event": event,
            "created_at": created_at,
            "updated_at": updated_at,
            "is_deleted": is_deleted,
            "actor_id": actor_id,
            "role": role,
        }
        self.batch_add_history([record])

    def batch_add_history(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        rows = [_history_row({**record, "id": str(uuid.uuid4())}) for record in records]
        with self._cursors(commit=True) as cursor:
            _insert(cursor, HISTORY_TABLE, HISTORY_COLUMNS, rows)

    def get_history(self, memory_id: str) -> list[dict[str, Any]]:
        """The memory's changes, oldest first (mem0's order: created_at, then updated_at, an
        ADD's empty updated_at first; rows written at once in the order they were written)."""
        with self._cursors() as cursor:
            cursor.execute(
                f"SELECT {', '.join(HISTORY_COLUMNS)} FROM {HISTORY_TABLE} WHERE memory_id = %s "  # noqa: S608 (constants)
                "ORDER BY created_at ASC NULLS FIRST, updated_at ASC NULLS FIRST, recorded_at ASC",
                [str(memory_id)],
            )
            rows = cursor.fetchall()
        return [
            {**dict(zip(HISTORY_COLUMNS, row, strict=True)), "id": str(row[0]), "is_deleted": bool(row[7])}
            for row in rows
        ]

    def save_messages(self, messages: list[dict[str, Any]], session_scope: str) -> None:
        """Keep these messages of the scope, and only its last ten (mem0's rule)."""
        if not messages:
            return
        now = datetime.now(UTC).isoformat()
        rows = [
            (uuid.uuid4(), session_scope, message.get("role"), message.get("content"), message.get("name"), now)
            for message in messages
        ]
        with self._cursors(commit=True) as cursor:
            # One scope's messages are written one save at a time, across processes too.
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"{MESSAGES_TABLE}:{session_scope}"])
            _insert(cursor, MESSAGES_TABLE, MESSAGE_COLUMNS, rows)
            cursor.execute(
                f"DELETE FROM {MESSAGES_TABLE} WHERE session_scope = %s AND id NOT IN ("  # noqa: S608 (constants)
                f"SELECT id FROM {MESSAGES_TABLE} WHERE session_scope = %s "
                "ORDER BY created_at DESC NULLS LAST, recorded_at DESC LIMIT %s)",
                [session_scope, session_scope, KEPT_MESSAGES],
            )

    def get_last_messages(self, session_scope: str, limit: int = KEPT_MESSAGES) -> list[dict[str, Any]]:
        """The scope's last `limit` messages, oldest first."""
        with self._cursors() as cursor:
            cursor.execute(
                f"SELECT role, content, name, created_at FROM (SELECT role, content, name, created_at, recorded_at "  # noqa: S608
                f"FROM {MESSAGES_TABLE} WHERE session_scope = %s "
                "ORDER BY created_at DESC NULLS LAST, recorded_at DESC LIMIT %s) AS last "
                "ORDER BY created_at ASC NULLS FIRST, recorded_at ASC",
                [session_scope, limit],
            )
            rows = cursor.fetchall()
        return [{"role": r[0], "content": r[1], "name": r[2], "created_at": r[3]} for r in rows]

    def erase(self, ids: list[str], *, scope: str | None) -> None:
        """Delete the changes of these memories (mem0 keeps a deleted memory's text in its
        history) and, with a scope ("user_id=<uid>"), mem0's copy of that scope's messages."""
        with self._cursors(commit=True) as cursor:
            erase(cursor, ids, scope=scope)

    def reset(self) -> None:
        """mem0's reset: every memory is gone, and so is every history row and message."""
        with self._cursors(commit=True) as cursor:
            cursor.execute(f"TRUNCATE {HISTORY_TABLE}, {MESSAGES_TABLE}")

    def close(self) -> None:
        """Nothing of its own to close: the pool is the memory store's (closed with it)."""


class PortalMemory(Memory):
    """mem0's Memory with its history in PostgreSQL. mem0 opens SQLiteManager(history_db_path)
    in __init__ and in reset(); the portal gives it NO_FILE (no file is made) and puts
    PostgresHistory in its place at once."""

    db: Any

    def __init__(self, config: Any) -> None:
        if config.history_db_path != NO_FILE:
            raise ValueError(f"PortalMemory keeps no history file; give history_db_path={NO_FILE!r}")
        super().__init__(config)
        self._portal_history()

    def reset(self) -> None:
        super().reset()  # PostgresHistory.reset empties the tables; mem0 opens a new SQLiteManager
        self._portal_history()

    def _portal_history(self) -> None:
        if self.db is not None and not isinstance(self.db, PostgresHistory):
            self.db.close()
        self.db = PostgresHistory(self.vector_store._get_cursor)


def erase(cursor: Any, ids: list[str], *, scope: str | None) -> None:
    """Delete the history of these memories and, with a scope, that scope's messages (any
    psycopg or Django cursor: the caller's transaction)."""
    for start in range(0, len(ids), BATCH):
        cursor.execute(f"DELETE FROM {HISTORY_TABLE} WHERE memory_id = ANY(%s)", [ids[start : start + BATCH]])  # noqa: S608
    if scope is not None:
        cursor.execute(f"DELETE FROM {MESSAGES_TABLE} WHERE session_scope = %s", [scope])  # noqa: S608


def erase_sqlite(path: Path, ids: list[str], *, scope: str | None) -> None:
    """The same in a history.db not imported yet (memory off since before the upgrade): a
    purged user's history must not come back with a later import."""
    with closing(sqlite3.connect(path)) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        for start in range(0, len(ids), BATCH):
            batch = ids[start : start + BATCH]
            if "history" in tables:
                db.execute(f"DELETE FROM history WHERE memory_id IN ({','.join('?' * len(batch))})", batch)  # noqa: S608
        if scope is not None and "messages" in tables:
            db.execute("DELETE FROM messages WHERE session_scope = ?", (scope,))
        db.commit()


# The one-time import of mem0's SQLite history


@dataclass(frozen=True)
class Imported:
    path: Path
    history: int  # rows added (a second run: 0)
    messages: int
    renamed_to: Path | None


def import_sqlite(path: Path, conninfo: str, *, rename: bool = True) -> Imported | None:
    """Copy mem0's SQLite history at `path` into the portal's tables, in one transaction;
    None when there is no such file. Rows keep mem0's ids, so an import run twice (or by two
    processes at once) adds each row once. After it, the file is renamed
    history.db.imported: kept for the operator, never read again."""
    if not path.is_file():
        return None
    history = list(_sqlite_rows(path, "history", HISTORY_COLUMNS))
    messages = list(_sqlite_rows(path, "messages", MESSAGE_COLUMNS))
    with psycopg.connect(conninfo) as connection, connection.cursor() as cursor:
        added_history = _insert(cursor, HISTORY_TABLE, HISTORY_COLUMNS, [_history_row(r) for r in history], ignore=True)
        added_messages = _insert(
            cursor, MESSAGES_TABLE, MESSAGE_COLUMNS, [_message_row(r) for r in messages], ignore=True
        )
        connection.commit()
    renamed = _renamed(path) if rename else None
    log.info("Imported mem0's SQLite history %s: %d changes, %d messages", path, added_history, added_messages)
    return Imported(path, added_history, added_messages, renamed)


def _renamed(path: Path) -> Path | None:
    target = path.with_name(path.name + IMPORTED_SUFFIX)
    try:
        path.replace(target)
    except FileNotFoundError:  # another process imported it at the same time
        return None
    return target


def _sqlite_rows(path: Path, table: str, columns: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    """A table's rows in the order they were written; columns an older mem0 did not have are
    None (mem0's own migration would do the same), a table it did not have gives nothing."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        if db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone() is None:
            return
        present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        selected = ", ".join(column if column in present else "NULL" for column in columns)
        for row in db.execute(f"SELECT {selected} FROM {table} ORDER BY rowid"):  # noqa: S608 (constants)
            yield dict(zip(columns, row, strict=True))


def _history_row(record: dict[str, Any]) -> tuple[Any, ...]:
    return (
        _uuid(record.get("id")),
        str(record.get("memory_id") or ""),
        record.get("old_memory"),
        record.get("new_memory"),
        str(record.get("event") or ""),
        _text(record.get("created_at")),
        _text(record.get("updated_at")),
        bool(record.get("is_deleted") or 0),
        record.get("actor_id"),
        record.get("role"),
    )


def _message_row(record: dict[str, Any]) -> tuple[Any, ...]:
    return (
        _uuid(record.get("id")),
        str(record.get("session_scope") or ""),
        record.get("role"),
        record.get("content"),
        record.get("name"),
        _text(record.get("created_at")),
    )


def _uuid(value: Any) -> uuid.UUID:
    """mem0's row id (a UUID); an id that is not one gets a UUID made from it, the same on
    every run (the import stays idempotent)."""
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return uuid.uuid5(uuid.NAMESPACE_URL, f"mem0-history:{value}")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _insert(
    cursor: Any, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]], *, ignore: bool = False
) -> int:
    """Insert the rows one statement each, in order (recorded_at, clock_timestamp(), keeps
    it); with ignore, rows whose id is there already are skipped. How many were added."""
    added = 0
    placeholders = "(" + ", ".join(["%s"] * len(columns)) + ")"
    conflict = " ON CONFLICT (id) DO NOTHING" if ignore else ""
    for row in rows:
        cursor.execute(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES {placeholders}{conflict}",  # noqa: S608 (constants)
            row,
        )
        added += cursor.rowcount
    return added

"""mem0 on the portal's own database and models: building it (`build`) and checking that its
table's vectors match the embedding model (`check_dims`, also a Django system check). Its
history is in the portal's database too (assistant.memory.history): no SQLite file."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
from django.conf import settings
from django.db import connections
from psycopg.conninfo import make_conninfo

from assistant.memory import backends, history
from assistant.memory.errors import MemoryUnavailable
from providers import registry
from providers.base import ProviderError

log = logging.getLogger(__name__)


def conninfo() -> str:
    """The portal's own database, as Django connects to it (the test database in tests)."""
    db = connections["default"].settings_dict
    options = {"dbname": db["NAME"], "user": db["USER"], "password": db["PASSWORD"], "host": db["HOST"]}
    options["port"] = db["PORT"]
    return make_conninfo(**{key: str(value) for key, value in options.items() if value})


def build() -> Any:
    """mem0's Memory on the portal's database and models; MemoryUnavailable when memory is off
    or its table was built for another embedding size."""
    if not settings.MEMORY_ENABLED:
        raise MemoryUnavailable("memory is off (PORTAL_MEMORY=false)")
    from mem0.configs.base import MemoryConfig
    from mem0.configs.vector_stores.pgvector import PGVectorConfig
    from mem0.embeddings.configs import EmbedderConfig
    from mem0.llms.configs import LlmConfig
    from mem0.vector_stores.configs import VectorStoreConfig

    backends.register()
    try:
        dims = registry.text_embedder().dims
    except ProviderError as exc:
        raise MemoryUnavailable(f"the embedding model is not available: {exc}") from exc
    store = PGVectorConfig(
        connection_string=conninfo(),
        collection_name=settings.MEMORY_TABLE,
        embedding_model_dims=dims,
        hnsw=False,
        minconn=1,
        maxconn=4,
    )
    check_dims(dims)
    _import_at_start()
    # model_construct: mem0's config models accept only the providers they list.
    config = MemoryConfig.model_construct(
        vector_store=VectorStoreConfig.model_construct(provider=backends.STORE, config=store),
        embedder=EmbedderConfig.model_construct(provider=backends.EMBEDDER, config={"embedding_dims": dims}),
        llm=_llm_config(LlmConfig),
        history_db_path=history.NO_FILE,
    )
    return history.PortalMemory(config)


def _import_at_start() -> None:
    """The import at a process's first build: a file that cannot be read is logged, not fatal
    (memory works without its old history; the file stays, for the command to retry)."""
    try:
        import_sqlite_history()
    except (sqlite3.Error, psycopg.Error, OSError) as exc:
        log.error(
            "mem0's old history %s could not be moved into PostgreSQL: %s. Memory works without it; "
            "`manage.py memory --import-sqlite-history` tries again.",
            sqlite_history_path(),
            exc,
        )


def sqlite_history_path() -> Path:
    """Where mem0 kept its history before it moved to PostgreSQL."""
    return Path(settings.MEM0_DIR) / "history.db"


def import_sqlite_history(path: Path | None = None) -> history.Imported | None:
    """Move mem0's old SQLite history into the portal's tables, once: at the first build of
    mem0 in any process (web, worker, `manage.py memory --import-sqlite-history`) on the
    machine that has the file; the file is then renamed and never read again. None: no file."""
    imported = history.import_sqlite(path or sqlite_history_path(), conninfo())
    if imported is not None:
        log.info(
            "mem0's history was moved from %s into PostgreSQL (%d changes, %d messages); the file is now %s",
            imported.path,
            imported.history,
            imported.messages,
            imported.renamed_to,
        )
    return imported


def _llm_config(config_class: Any) -> Any:
    chat = registry.role_config("chat")
    options: dict[str, Any] = {"model": chat.model, "temperature": 0.1, "max_tokens": settings.MEMORY_MAX_TOKENS}
    if chat.provider == "openai":  # mem0's own OpenAI client, at the configured base URL
        options.update(api_key=chat.api_key or "none", openai_base_url=chat.base_url)
        return config_class.model_construct(provider=backends.OPENAI_LLM, config=options)
    return config_class.model_construct(provider=backends.LLM, config=options)


def stored_dims() -> int | None:
    """The size of the vectors in the memory table; None before the first memory (no table)."""
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT a.atttypmod FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relname = %s AND a.attname = 'vector'",
            [settings.MEMORY_TABLE],
        )
        row = cursor.fetchone()
    return int(row[0]) if row else None


def check_dims(dims: int | None = None) -> None:
    """The memory table's vectors and the embedding model must have the same size: a clear
    error at startup (`migrate`, `check --database default`, the first use in a process), not
    a failed insert later. The model is only asked when there is a table to compare with."""
    stored = stored_dims()
    if stored is None:
        return
    if dims is None:
        try:
            dims = registry.text_embedder().dims
        except ProviderError as exc:
            raise MemoryUnavailable(f"the embedding model is not available: {exc}") from exc
    if stored != dims:
        raise MemoryUnavailable(
            f"the memory table {settings.MEMORY_TABLE} holds {stored}-dimensional vectors but the embedding model "
            f"({registry.role_config('embedding')}) gives {dims}: configure the model the memories were made "
            "with, or export the memories and delete them all (My memory) before changing models"
        )

"""What mem0 is built from: the portal's models and the portal's PostgreSQL, registered with
mem0's factories under the portal's own names.

- PortalEmbedding: the portal's text embedder (the same model and dims as the document
  index; e5's query/passage prefixes; the provider layer's retries and timeouts).
- PortalLLM: the portal's chat model (local or DashScope), with EXTRACTION instead of mem0's
  8,000-token extraction instructions; RecordingOpenAILLM: mem0's own OpenAI client, for
  PROVIDER_CHAT=openai (any OpenAI-compatible base URL). Both keep the model's last output
  so that the service can tell "nothing worth remembering" from "unusable output".
- PortalPGVector: mem0's pgvector store with the table laid out for one user at a time
  (exact search within the user's rows), Chinese-aware keyword matching (jieba terms, as in
  the document index; mem0 issue #4884), and no search or listing without a user.

Only assistant/memory imports this module.
"""

from __future__ import annotations

import builtins
import json
import logging
import re
import threading
from typing import Any

from mem0.configs.prompts import ADDITIVE_EXTRACTION_PROMPT
from mem0.embeddings.base import EmbeddingBase
from mem0.llms.base import LLMBase
from mem0.llms.openai import OpenAILLM
from mem0.memory.utils import remove_code_blocks
from mem0.utils.factory import EmbedderFactory, LlmFactory, VectorStoreFactory
from mem0.vector_stores.pgvector import OutputData as Row
from mem0.vector_stores.pgvector import PGVector, _build_filter_conditions
from psycopg import sql

from assistant.memory.prompts import EXTRACTION
from assistant.memory.revisions import about_user
from common.language import language_of
from common.logs import with_content
from ingestion.terms import terms
from providers import registry
from providers.base import ChatMessage

log = logging.getLogger(__name__)

EMBEDDER = "portal"
LLM = "portal"
OPENAI_LLM = "portal_openai"
STORE = "portal_pgvector"
MAX_QUERY_TERMS = 16
# A keyword score on the scale mem0's sigmoid expects (mem0/utils/scoring.py: midpoint 5 for
# short queries): 10 when a memory holds every term of the question, 5 for half of them.
FULL_MATCH = 10.0


class ScopeError(RuntimeError):
    """A search or listing of memories without a user: refused, never run."""


def register() -> None:
    """Make the portal's parts known to mem0's factories (idempotent)."""
    EmbedderFactory.provider_to_class[EMBEDDER] = f"{__name__}.PortalEmbedding"
    LlmFactory.register_provider(LLM, f"{__name__}.PortalLLM")
    from mem0.configs.llms.openai import OpenAIConfig

    LlmFactory.register_provider(OPENAI_LLM, f"{__name__}.RecordingOpenAILLM", OpenAIConfig)
    VectorStoreFactory.provider_to_class[STORE] = f"{__name__}.PortalPGVector"


class PortalEmbedding(EmbeddingBase):
    def embed(self, text: Any, memory_action: str | None = None) -> list[float]:
        embedder = registry.text_embedder()
        if memory_action == "search":
            return embedder.embed_query(str(text))
        return embedder.embed_documents([str(text)])[0]

    def embed_batch(self, texts: Any, memory_action: str = "add") -> list[list[float]]:
        embedder = registry.text_embedder()
        if memory_action == "search":
            return [embedder.embed_query(str(text)) for text in texts]
        return embedder.embed_documents([str(text) for text in texts])


# The last output of the memory model in this thread (one extraction at a time per thread).
_outputs = threading.local()


def forget_output() -> None:
    _outputs.last = None
    _outputs.dropped_all = False


def dropped_all() -> bool:
    """Whether the last extraction wrote memories and revisions.about_user dropped every one."""
    return bool(getattr(_outputs, "dropped_all", False))


def last_output() -> str | None:
    return getattr(_outputs, "last", None)


def usable_extraction(output: str | None) -> bool:
    """Whether the model gave what mem0 reads: {"memory": [{"text": ...}, ...]} (maybe empty)."""
    if output is None:
        return False
    try:
        data = json.loads(remove_code_blocks(output), strict=False)
    except ValueError:
        return False
    items = data.get("memory") if isinstance(data, dict) else None
    return isinstance(items, list) and all(isinstance(item, dict) and "text" in item for item in items)


class PortalLLM(LLMBase):
    def generate_response(
        self, messages: list[dict[str, str]], tools: Any = None, tool_choice: str = "auto", **kwargs: Any
    ) -> str:
        from django.conf import settings

        chat = [ChatMessage(m["role"], str(m["content"])) for m in messages]  # type: ignore[arg-type]
        extracting = bool(chat) and _extraction(chat[0].content)
        if extracting:
            chat[0] = ChatMessage("system", EXTRACTION[language_of(new_messages(chat[-1].content))])
        response_format = kwargs.get("response_format") or {}
        result = registry.chat_model().complete(
            chat,
            json_mode=response_format.get("type") == "json_object",
            max_tokens=settings.MEMORY_MAX_TOKENS,
            temperature=0.1,
        )
        return _kept(result.text, chat[-1].content) if extracting else result.text


class RecordingOpenAILLM(OpenAILLM):
    def generate_response(self, *args: Any, **kwargs: Any) -> Any:
        output = super().generate_response(*args, **kwargs)
        messages = kwargs.get("messages") or (args[0] if args else [])
        if not isinstance(output, str):
            _outputs.last = None
            return output
        if messages and _extraction(str(messages[0].get("content", ""))):
            return _kept(output, str(messages[-1].get("content", "")))
        _outputs.last = output
        return output


def _extraction(system: str) -> bool:
    """Whether a system prompt is mem0's extraction instructions (its other calls pass as they are)."""
    return system.startswith(ADDITIVE_EXTRACTION_PROMPT[:200])


def new_messages(prompt: str) -> str:
    """The "## New Messages" section of mem0's extraction prompt: what the user just said,
    without mem0's "user: " labels (they would make "我是 SRE" read as English)."""
    section = prompt.split("## New Messages", 1)[-1].split("\n## ", 1)[0]
    return ROLE_LABEL.sub("", section).strip()


ROLE_LABEL = re.compile(r"^(?:user|assistant|system): ", re.MULTILINE)


def _kept(output: str, prompt: str) -> str:
    """The model's output with only the memories about the user (revisions.about_user) left
    in; kept as the last output. Output that is not mem0's JSON is returned as it is."""
    _outputs.last = output
    try:
        data = json.loads(remove_code_blocks(output), strict=False)
    except ValueError:
        return output
    items = data.get("memory") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return output
    said = new_messages(prompt)
    kept = [item for item in items if isinstance(item, dict) and about_user(str(item.get("text", "")), said)]
    if len(kept) < len(items):
        dropped = [item.get("text") for item in items if item not in kept and isinstance(item, dict)]
        with_content(
            log, logging.INFO, "Memory extraction: dropped %d not about the user", len(dropped), dropped=dropped
        )
    _outputs.dropped_all = bool(items) and not kept
    filtered = json.dumps({**data, "memory": kept}, ensure_ascii=False)
    _outputs.last = filtered
    return filtered


# In nearly every memory ("用户喜欢…", "User prefers…"): matching on them says nothing and
# would make every memory a keyword candidate.
MEMORY_STOPWORDS = frozenset({"用户", "user"})


def memory_terms(text: str) -> list[str]:
    return sorted(term for term in terms(text) if term not in MEMORY_STOPWORDS)


def keyword_text(text: str) -> str:
    """The jieba terms of `text`, space-separated: what keyword matching compares."""
    return " ".join(memory_terms(text))


class PortalPGVector(PGVector):
    """One table: (id, vector, payload); payload->>'user_id' is the portal user's UID. A
    user's memories are thousands, not millions, so search reads that user's rows through a
    B-tree on the UID and ranks them exactly: an HNSW index over everyone's memories would
    be post-filtered and lose a user's memories among other people's."""

    def create_col(self) -> None:
        table = self.collection_name
        with self._get_cursor(commit=True) as cur:
            # Processes (web, workers) may create it at once: one at a time.
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (table,))
            cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
            cur.execute(
                sql.SQL("CREATE TABLE IF NOT EXISTS {} (id uuid PRIMARY KEY, vector vector({}), payload jsonb)").format(
                    self._col(), sql.Literal(self.embedding_model_dims)
                )
            )
            cur.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} ((payload->>'user_id'))").format(
                    sql.Identifier(f"{table}_user_idx"), self._col()
                )
            )

    def insert(self, vectors: list[list[float]], payloads: Any = None, ids: Any = None) -> None:
        super().insert(vectors, [_with_keywords(payload) for payload in payloads or []], ids)

    def update(self, vector_id: str, vector: list[float] | None = None, payload: dict[str, Any] | None = None) -> None:
        super().update(vector_id, vector, _with_keywords(payload) if payload is not None else None)

    def search(
        self, query: str, vectors: list[float], top_k: int | None = 5, filters: dict[str, Any] | None = None
    ) -> list[Row]:
        _require_user(filters)
        return super().search(query, vectors, top_k, filters)

    def keyword_search(self, query: str, top_k: int = 5, filters: dict[str, Any] | None = None) -> list[Row]:
        """Memories sharing jieba terms with the query, scored by the share of the query's
        terms each holds (mem0 issue #4884: its keyword path does not segment Chinese)."""
        _require_user(filters)
        wanted = memory_terms(query)[:MAX_QUERY_TERMS]
        if not wanted:
            return []
        self._ensure_collection()
        conditions, params = _build_filter_conditions(filters)
        with self._get_cursor() as cur:
            cur.execute(
                sql.SQL(
                    """
                    SELECT id, payload, cardinality(ARRAY(
                        SELECT unnest(string_to_array(payload->>'text_lemmatized', ' '))
                        INTERSECT SELECT unnest(%s::text[])
                    )) AS matched
                    FROM {} WHERE {} AND string_to_array(payload->>'text_lemmatized', ' ') && %s::text[]
                    ORDER BY matched DESC, id LIMIT %s
                    """
                ).format(self._col(), sql.SQL(" AND ".join(conditions))),
                (wanted, *params, wanted, top_k),
            )
            rows = cur.fetchall()
        return [Row(id=str(r[0]), score=FULL_MATCH * r[2] / len(wanted), payload=r[1]) for r in rows]

    def list(self, filters: dict[str, Any] | None = None, top_k: int | None = 100) -> builtins.list[builtins.list[Row]]:
        """Newest first (mem0's own listing has no order)."""
        _require_user(filters)
        self._ensure_collection()
        conditions, params = _build_filter_conditions(filters)
        with self._get_cursor() as cur:
            cur.execute(
                sql.SQL("SELECT id, payload FROM {} WHERE {} ORDER BY payload->>'created_at' DESC, id LIMIT %s").format(
                    self._col(), sql.SQL(" AND ".join(conditions))
                ),
                (*params, top_k),
            )
            rows = cur.fetchall()
        return [[Row(id=str(r[0]), score=None, payload=r[1]) for r in rows]]

    def page(self, user_id: str, limit: int, offset: int) -> builtins.list[Row]:
        """One page of a user's rows, newest first, read in SQL (not the whole list)."""
        _require_user({"user_id": user_id})
        self._ensure_collection()
        with self._get_cursor() as cur:
            cur.execute(
                sql.SQL(
                    "SELECT id, payload FROM {} WHERE payload->>'user_id' = %s "
                    "ORDER BY payload->>'created_at' DESC, id LIMIT %s OFFSET %s"
                ).format(self._col()),
                (user_id, limit, offset),
            )
            return [Row(id=str(r[0]), score=None, payload=r[1]) for r in cur.fetchall()]

    def every_text(self) -> builtins.list[tuple[str, str, str]]:
        """(id, user_id, text) of every memory of every user: for an operator's maintenance
        (`manage.py tidy_memories`), never for a user's request."""
        if self.collection_name not in self.list_cols():
            return []
        with self._get_cursor() as cur:
            cur.execute(sql.SQL("SELECT id, payload->>'user_id', payload->>'data' FROM {}").format(self._col()))
            return [(str(r[0]), str(r[1]), str(r[2] or "")) for r in cur.fetchall()]

    def count(self, user_id: str) -> int:
        _require_user({"user_id": user_id})
        self._ensure_collection()
        with self._get_cursor() as cur:
            cur.execute(
                sql.SQL("SELECT count(*) FROM {} WHERE payload->>'user_id' = %s").format(self._col()), (user_id,)
            )
            row = cur.fetchone()
        return int(row[0]) if row else 0

    def exists(self, user_id: str, digest: str) -> bool:
        """Whether the user already has a memory with this text (its md5, as mem0 stores it)."""
        self._ensure_collection()
        with self._get_cursor() as cur:
            cur.execute(
                sql.SQL("SELECT 1 FROM {} WHERE payload->>'user_id' = %s AND payload->>'hash' = %s LIMIT 1").format(
                    self._col()
                ),
                (user_id, digest),
            )
            return cur.fetchone() is not None

    def delete_user(self, user_id: str) -> builtins.list[str]:
        """Delete every row of one user in one statement; the ids deleted."""
        if not user_id:
            raise ScopeError("refusing to delete memories without a user")
        if self.collection_name not in self.list_cols():
            return []
        with self._get_cursor(commit=True) as cur:
            cur.execute(
                sql.SQL("DELETE FROM {} WHERE payload->>'user_id' = %s RETURNING id").format(self._col()), (user_id,)
            )
            return [str(row[0]) for row in cur.fetchall()]

    def close(self) -> None:
        self.connection_pool.close()


def _require_user(filters: dict[str, Any] | None) -> None:
    if not filters or not filters.get("user_id"):
        raise ScopeError("refusing to read memories without a user")


def _with_keywords(payload: dict[str, Any]) -> dict[str, Any]:
    """mem0 fills text_lemmatized with spaCy lemmas (the text itself without spaCy): replace
    them with jieba terms, which match Chinese and English alike."""
    if payload.get("data"):
        payload = {**payload, "text_lemmatized": keyword_text(str(payload["data"]))}
    return payload

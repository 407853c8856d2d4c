"""The only code that reads or writes memories through mem0 (built by memory.setup). Every
call names the user it is for; the user's UID is mem0's `user_id`, passed on every add and in
the filters of every search and listing, and a memory of another user is not found
(MemoryNotFound), never read, changed or deleted.

    store = memories()                       # MemoryUnavailable: memory is off or misconfigured
    store.search(request.user, "年假怎么休？")   # [MemoryItem, ...], best first
    store.remember(user, "我在西安办公室工作。年假有几天？", conversation=3, message=12)
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, overload

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections

from assistant.memory import revisions
from assistant.memory.errors import MemoryAccessError, MemoryInputError, MemoryNotFound, MemoryUnavailable
from assistant.memory.gate import gate
from assistant.memory.prompts import CARD, CARD_INSTRUCTIONS, OUTDATED
from audit.log import record
from audit.models import Action
from common.language import Language, language_of
from common.logs import with_content
from portal.typing import AnyUser
from providers import registry
from providers.base import ChatMessage, ProviderError

if TYPE_CHECKING:
    from assistant.memory import backends

# mem0 (with openai, qdrant and opentelemetry: about 1.5 s of imports) is imported when a
# process first uses memory, not by every process that imports this module: the admin and the
# account signals import it at start, in each web and worker process and each manage.py run.

log = logging.getLogger(__name__)

MAX_TEXT = 2000  # characters of one memory (an edit, a card)
LISTED = 100_000  # more memories than one person has


@dataclass(frozen=True)
class MemoryItem:
    id: str
    text: str
    created_at: str | None
    updated_at: str | None
    score: float | None = None
    conversation: int | None = None
    message: int | None = None
    inferred: bool = True  # False: a question and answer kept as they were (the model could not extract)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Remembered:
    items: tuple[MemoryItem, ...]  # added or updated
    inferred: bool  # extracted by the model; False: the user's words were stored as they were
    updated: tuple[str, ...] = ()  # ids of memories a correction changed
    deleted: tuple[str, ...] = ()  # ids of memories a forget or a correction removed


def uid_of(user: AnyUser | None) -> str:
    uid = getattr(user, "uid", None) if user is not None and user.is_authenticated else None
    if not uid:
        raise MemoryAccessError("memories are read and written for a signed-in user only")
    return str(uid)


class Memories:
    def __init__(self, memory: Any) -> None:
        self._mem0 = memory
        self._store: backends.PortalPGVector = memory.vector_store

    # Reading

    def search(self, user: AnyUser, query: str, *, limit: int | None = None) -> list[MemoryItem]:
        """The user's memories about `query`, best first (mem0's ranking: dense similarity,
        raised by shared jieba terms). A memory counts as about the query when it shares a
        term with it, or, sharing none, when its dense similarity is at least MEMORY_MIN_SCORE:
        e5's similarities alone do not separate related memories from unrelated ones (0.83-0.87
        for both in Chinese), shared terms mostly do."""
        return self._search(uid_of(user), query, limit or settings.MEMORY_SEARCH_LIMIT)

    def listing(self, user: AnyUser) -> Listing:
        """The user's memories, newest first, read a page at a time when sliced (Django's
        Paginator and DRF's pagination take it like a queryset)."""
        return Listing(self._store, uid_of(user))

    def all(self, user: AnyUser) -> list[MemoryItem]:
        """All the user's memories, newest first."""
        uid = uid_of(user)
        found = self._mem0.get_all(filters={"user_id": uid}, top_k=LISTED)
        return [_item(row) for row in found["results"] if row.get("user_id") == uid]

    def get(self, user: AnyUser, memory_id: str) -> MemoryItem:
        return _item(self._own(user, memory_id))

    def history(self, user: AnyUser, memory_id: str) -> list[dict[str, Any]]:
        """How the memory came to be: ADD, then each UPDATE, oldest first."""
        self._own(user, memory_id)
        return [
            {
                "event": change["event"],
                "old": change["old_memory"],
                "new": change["new_memory"],
                "created_at": change["created_at"],
                "updated_at": change["updated_at"],
            }
            for change in self._mem0.history(str(memory_id))
        ]

    def export(self, user: AnyUser) -> dict[str, Any]:
        """Everything the portal remembers about the user, with each memory's history."""
        uid = uid_of(user)
        items = self.all(user)
        return {
            "user": uid,
            "exported_at": datetime.now(UTC).isoformat(),
            "count": len(items),
            "memories": [{**item.as_dict(), "history": self.history(user, item.id)} for item in items],
        }

    # Writing

    def remember(
        self,
        user: AnyUser,
        text: str,
        *,
        conversation: int | None = None,
        message: int | None = None,
    ) -> Remembered:
        """What the user said about themselves becomes memories; nothing else does.

        The gate (assistant.memory.gate) keeps a turn only when the user states something
        about themselves, corrects it, or asks to remember or forget; a document question
        stores nothing and costs no model call. Only the user's own sentences reach the
        model, never the answer (the documents are not the user). The
        model's memories that restate a question or are not in the user's words are dropped
        (revisions.about_user). When its output is unusable, or it fails, the user's words
        are stored as they are (mem0 infer=False). A correction replaces what it corrects
        (mem0 UPDATE of the old memory: its history keeps the old text); a forget deletes
        what it names (mem0 DELETE, history kept)."""
        said = gate(text)
        if not said.keep:
            return Remembered((), inferred=False)
        uid = uid_of(user)
        kinds = list(zip(said.sentences, said.kinds, strict=True))
        forgets = [sentence for sentence, kind in kinds if kind == "forget"]
        deleted = [memory_id for sentence in forgets for memory_id in self._forget(uid, sentence)]
        rest = " ".join(sentence for sentence, kind in kinds if kind != "forget")[:MAX_TEXT]
        if not rest:
            return Remembered((), inferred=False, deleted=tuple(deleted))
        metadata = {"conversation": conversation, "message": message}
        # The language of the whole turn: "我是 SRE" alone reads as English.
        items, inferred = self._extract(uid, rest, language_of(text), metadata)
        if items and any(kind == "correction" for _sentence, kind in kinds):
            corrected = self._correct(uid, rest, items, inferred)
            return replace(corrected, deleted=(*deleted, *corrected.deleted))
        return Remembered(tuple(items), inferred=inferred, deleted=tuple(deleted))

    def _extract(
        self, uid: str, said: str, language: Language, metadata: dict[str, Any]
    ) -> tuple[list[MemoryItem], bool]:
        from mem0.exceptions import LLMError

        from assistant.memory import backends

        backends.forget_output()
        output: str | None = None
        try:
            added = self._mem0.add(
                [{"role": "user", "content": said}],
                user_id=uid,
                metadata=metadata,
                infer=True,
                prompt=CARD_INSTRUCTIONS[language],
            )["results"]
        except (ProviderError, LLMError) as exc:  # mem0 wraps the model's errors in LLMError
            reason = f"the model failed: {exc}"
        else:
            if added:
                return self._added(uid, added), True
            output = backends.last_output()
            if backends.dropped_all():  # the gate saw something the model could not say
                reason = "every memory the model wrote was dropped"
            elif backends.usable_extraction(output):
                return [], True  # nothing new to keep (or already kept: mem0 skips duplicates)
            else:
                reason = f"nothing usable in its {len(str(output))} characters"
        with_content(
            log,
            logging.WARNING,
            "Memory extraction for user %s: storing their words as they are (%s)",
            uid,
            reason,
            output=output,
        )
        card = CARD[language].format(said=said)[:MAX_TEXT]
        if self._store.exists(uid, hashlib.md5(card.encode()).hexdigest()):  # noqa: S324 (mem0's own digest)
            return [], False
        added = self._mem0.add(card, user_id=uid, metadata={**metadata, "inferred": False}, infer=False)["results"]
        return self._added(uid, added), False

    def _forget(self, uid: str, said: str) -> list[str]:
        """Delete the user's memories that a forget names ("忘掉我喜欢表格"); their ids."""
        target = revisions.forget_target(said)
        gone = [row.id for row in self._search(uid, target, 10) if revisions.matches(target, row.text)]
        for memory_id in gone:
            self._mem0.delete(memory_id)
        log.info("Forgot %d memories of user %s", len(gone), uid)
        return gone

    def _correct(self, uid: str, said: str, items: list[MemoryItem], inferred: bool) -> Remembered:
        """The memories a correction makes wrong take its new text (mem0 UPDATE: the old text
        stays in their history); the new copy goes."""
        new = items[0]
        fresh = {item.id for item in items}
        candidates = [row for row in self._search(uid, f"{said} {new.text}", 10) if row.id not in fresh]
        old_value = revisions.replaced_value(said)
        if old_value:
            outdated = [row for row in candidates if revisions.matches(old_value, row.text)]
        else:  # the model picks; a memory that shares nothing with what was said is not it
            outdated = [
                row for row in self._outdated(new.text, candidates) if revisions.related(row.text, f"{said} {new.text}")
            ]
        if not outdated:
            return Remembered(tuple(items), inferred=inferred)
        first, *rest = outdated
        self._mem0.update(first.id, text=new.text)
        for row in rest:
            self._mem0.delete(row.id)
        self._mem0.delete(new.id)
        self._erase_history([new.id], scope=None)
        updated = _item(self._mem0.get(first.id))
        return Remembered(
            (updated, *items[1:]), inferred=inferred, updated=(first.id,), deleted=tuple(row.id for row in rest)
        )

    def _outdated(self, new: str, candidates: list[MemoryItem]) -> list[MemoryItem]:
        """The candidates the chat model says `new` replaces (a correction that names no old value)."""
        if not candidates:
            return []
        language = language_of(new)
        listing = "\n".join(f"{number}. {row.text}" for number, row in enumerate(candidates[:5], 1))
        label = ("旧记忆", "新信息") if language == "zh" else ("Old memories", "New information")
        prompt = [
            ChatMessage("system", OUTDATED[language]),
            ChatMessage("user", f"{label[0]}:\n{listing}\n\n{label[1]}: {new}"),
        ]
        try:
            output = registry.chat_model().complete(prompt, json_mode=True, max_tokens=40, temperature=0.0).text
            numbers = json.loads(output).get("outdated", [])
        except (ProviderError, ValueError, AttributeError) as exc:
            log.warning("Could not tell which memories a correction replaces: %s", exc)
            return []
        picked = {int(n) for n in numbers if isinstance(n, int | str) and str(n).isdigit()}
        return [row for number, row in enumerate(candidates[:5], 1) if number in picked]

    def _search(self, uid: str, query: str, limit: int) -> list[MemoryItem]:
        query = " ".join(str(query or "").split())[: settings.MAX_QUERY_CHARS]
        if not query:
            return []
        found = self._mem0.search(query, top_k=limit * 2, filters={"user_id": uid}, threshold=0.0, explain=True)
        rows = [
            row
            for row in found["results"]
            if row.get("user_id") == uid
            and (
                row["score_details"]["bm25_score"] > 0
                or row["score_details"]["semantic_score"] >= settings.MEMORY_MIN_SCORE
            )
        ]
        return [_item(row) for row in rows[:limit]]

    def update(self, user: AnyUser, memory_id: str, text: str) -> MemoryItem:
        self._own(user, memory_id)
        self._mem0.update(str(memory_id), text=_checked(text))
        return self.get(user, memory_id)

    def delete(self, user: AnyUser, memory_id: str) -> None:
        """Delete one memory and its history (mem0 would keep the old text in its history)."""
        self._own(user, memory_id)
        self._mem0.delete(str(memory_id))
        self._erase_history([str(memory_id)], scope=None)

    def delete_all(self, user: AnyUser) -> int:
        """Delete everything remembered about the user, histories and mem0's copy of their recent
        messages included; how many memories there were."""
        return self.purge(uid_of(user))

    def purge(self, uid: str) -> int:
        """delete_all by UID: for a deleted account (no user left) and the admin's purge."""
        if not uid:
            raise MemoryAccessError("purge needs a user's UID")
        ids = self._store.delete_user(uid)
        self._mem0.entity_store.delete_user(uid)  # (filled only where spaCy finds entities)
        self._erase_history(ids, scope=f"user_id={uid}")
        log.info("Deleted %d memories of user %s", len(ids), uid)
        _record_purge(uid, len(ids))
        return len(ids)

    # Maintenance (an operator's, for every user: manage.py tidy_memories)

    def questions(self) -> list[tuple[str, str, str]]:
        """(id, user uid, text) of every stored memory that is a question, not a fact about its user."""
        return [row for row in self._store.every_text() if revisions.not_about_user(row[2])]

    def drop(self, memory_id: str) -> None:
        """Delete one memory by id, its history kept (mem0 records the DELETE)."""
        self._mem0.delete(str(memory_id))

    # Plumbing

    def _own(self, user: AnyUser, memory_id: str) -> dict[str, Any]:
        uid = uid_of(user)
        try:
            key = str(uuid.UUID(str(memory_id)))
        except ValueError:
            raise MemoryNotFound(memory_id) from None
        row = self._mem0.get(key)
        if not row or row.get("user_id") != uid:
            raise MemoryNotFound(memory_id)
        return dict(row)

    def _added(self, uid: str, added: list[dict[str, Any]]) -> list[MemoryItem]:
        rows = (self._mem0.get(entry["id"]) for entry in added if entry.get("event") == "ADD")
        return [_item(row) for row in rows if row and row.get("user_id") == uid]

    def _erase_history(self, ids: list[str], *, scope: str | None) -> None:
        self._mem0.db.erase(ids, scope=scope)

    def close(self) -> None:
        self._store.close()
        entities = self._mem0._entity_store
        if entities is not None:
            entities.close()
        self._mem0.close()


class Listing(Sequence[MemoryItem]):
    def __init__(self, store: backends.PortalPGVector, uid: str) -> None:
        self._store, self._uid = store, uid
        self._count: int | None = None

    def __len__(self) -> int:  # what Paginator and DRF count (once per listing)
        if self._count is None:
            self._count = self._store.count(self._uid)
        return self._count

    @overload
    def __getitem__(self, index: int) -> MemoryItem: ...

    @overload
    def __getitem__(self, index: slice) -> list[MemoryItem]: ...

    def __getitem__(self, index: int | slice) -> MemoryItem | list[MemoryItem]:
        if isinstance(index, int):
            found = self[index : index + 1] if index >= 0 else []
            if not found:
                raise IndexError(index)
            return found[0]
        if index.step not in (None, 1):
            raise TypeError("a memory listing is read by contiguous slices")
        start = max(index.start or 0, 0)
        stop = len(self) if index.stop is None else max(index.stop, start)
        rows = self._store.page(self._uid, stop - start, start)
        return [_row_item(row) for row in rows if row.payload and row.payload.get("user_id") == self._uid]


# The payload keys mem0 keeps for itself; the rest is the memory's metadata.
CORE_KEYS = {"data", "hash", "created_at", "updated_at", "text_lemmatized", "user_id", "role", "attributed_to"}


def _row_item(row: Any) -> MemoryItem:
    """A row read by the portal's own SQL, as mem0 would have shaped it."""
    payload = row.payload or {}
    return _item(
        {
            "id": row.id,
            "memory": payload.get("data", ""),
            "created_at": payload.get("created_at"),
            "updated_at": payload.get("updated_at"),
            "metadata": {key: value for key, value in payload.items() if key not in CORE_KEYS},
        }
    )


def _item(row: dict[str, Any]) -> MemoryItem:
    extra = row.get("metadata") or {}
    return MemoryItem(
        id=str(row["id"]),
        text=row.get("memory") or "",
        created_at=row.get("created_at"),
        updated_at=row.get("updated_at"),
        score=round(float(row["score"]), 4) if row.get("score") is not None else None,
        conversation=extra.get("conversation"),
        message=extra.get("message"),
        inferred=extra.get("inferred", True) is not False,
    )


def _checked(text: str) -> str:
    text = " ".join(str(text or "").split())
    if not text:
        raise MemoryInputError("A memory cannot be empty.")
    if len(text) > MAX_TEXT:
        raise MemoryInputError(f"A memory holds at most {MAX_TEXT} characters.")
    return text


def forget_user(uid: str) -> int:
    """Delete everything remembered about a user (their account is gone, or an admin purges
    them). Works with memory off too: what was remembered while it was on goes as well."""
    try:
        return memories().purge(uid)
    except MemoryUnavailable:
        pass
    from assistant.memory import history
    from assistant.memory.setup import sqlite_history_path, stored_dims

    if stored_dims() is None:
        return 0
    with connections["default"].cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {settings.MEMORY_TABLE} WHERE payload->>'user_id' = %s RETURNING id",  # noqa: S608 (a setting)
            [uid],
        )
        ids = [str(row[0]) for row in cursor.fetchall()]
        history.erase(cursor, ids, scope=f"user_id={uid}")
    old = sqlite_history_path()
    if old.exists():  # not imported yet (memory has been off since): its rows must not come back
        history.erase_sqlite(old, ids, scope=f"user_id={uid}")
    _record_purge(uid, len(ids))
    return len(ids)


def _record_purge(uid: str, count: int) -> None:
    """The audit entry of a purge (mem0's store is not in the portal's transaction: the
    entry follows the deletion). Only the count is kept, never what was remembered."""
    owner = get_user_model().objects.filter(uid=uid).values_list("pk", flat=True).first()
    label = f"{count} memories of {uid}"
    record(
        Action.MEMORY_PURGE,
        object_type="memory",
        object_id=uid,
        label=label,
        owner_id=owner,
        changes={"memories": (count, 0)},
    )


# One per process, built on first use (the embedder and a connection pool).

_service: Memories | None = None
_lock = threading.Lock()


def memories() -> Memories:
    global _service
    if _service is not None:
        return _service
    with _lock:
        if _service is None:
            from assistant.memory.setup import build

            _service = Memories(build())
        return _service


def close() -> None:
    """Close the process's memory service (its database connections)."""
    global _service
    with _lock:
        if _service is not None:
            _service.close()
            _service = None

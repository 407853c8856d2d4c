"""Conversations: a user's questions over chosen collections and the portal's cited answers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings as conf
from django.db import models
from django.db.models import Exists, OuterRef, QuerySet
from django.utils.translation import gettext_lazy as _

from knowledge.models import Collection
from knowledge.principal import about_token_collections
from portal.typing import AnyUser, User


class ConversationQuerySet(models.QuerySet["Conversation"]):
    def visible_to(self, user: AnyUser) -> ConversationQuerySet:
        """A conversation is its user's alone: not their team's, not an admin's through the API.
        A token limited to some collections reads only the conversations about them: every
        collection the last question named, and every one any of its answers searched, is one
        of the token's (knowledge/principal.py)."""
        if not user.is_authenticated:
            return self.none()
        return about_token_collections(self.filter(user=user), user, "collections", also=_searched)


def _searched(allowed: QuerySet[Any]) -> tuple[Exists, Exists]:
    """(an answer of the conversation searched one of `allowed`, one searched another)."""
    ids = [str(row["pk"]) for row in allowed]
    answers = Message.objects.filter(conversation=OuterRef("pk"))
    return Exists(answers.filter(Searched(ids, among=True))), Exists(answers.filter(Searched(ids, among=False)))


class Searched(models.Func):
    """Whether an answer's `searched` (a JSON list of {"id": …, "name": …}) names a collection
    whose id is among `ids` (`among`), or one whose id is not (not `among`)."""

    output_field = models.BooleanField()

    def __init__(self, ids: list[str], *, among: bool) -> None:
        super().__init__(models.F("searched"))
        self.ids, self.among = ids, among

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, tuple[Any, ...]]:  # type: ignore[override]
        column, params = compiler.compile(self.source_expressions[0])
        test = "item->>'id' = ANY(%s)" if self.among else "NOT COALESCE(item->>'id' = ANY(%s), false)"
        items = f"CASE WHEN jsonb_typeof({column}) = 'array' THEN {column} ELSE '[]'::jsonb END"
        sql = f"EXISTS (SELECT 1 FROM jsonb_array_elements({items}) AS searched(item) WHERE {test})"  # noqa: S608 (a compiled column; ids are parameters)
        return sql, (*params, *params, self.ids)


class Conversation(models.Model):
    user = models.ForeignKey(
        conf.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations", verbose_name=_("user")
    )
    title = models.CharField(_("title"), max_length=200, blank=True)
    # What the last question searched; each question is checked against what the user may see now.
    collections = models.ManyToManyField(Collection, blank=True, related_name="+", verbose_name=_("collections"))
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    objects = ConversationQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at", "-pk"]
        verbose_name = _("conversation")
        verbose_name_plural = _("conversations")

    def __str__(self) -> str:
        return self.title or str(_("Conversation {id}").format(id=self.pk))

    @classmethod
    def with_history(
        cls, user: AnyUser, collection: Collection, title: str, history: Sequence[tuple[str, str]]
    ) -> Conversation:
        """A conversation of `user` over `collection` holding these (role, content) turns, as
        if the user had asked them: where an evaluation asks a follow-up question."""
        if not isinstance(user, User):  # an evaluation runs as a person: never anonymous
            raise TypeError("a conversation belongs to a signed-in user")
        conversation = cls.objects.create(user=user, title=title[:80])
        conversation.collections.add(collection)
        Message.objects.bulk_create(
            Message(conversation=conversation, role=role, content=content) for role, content in history
        )
        return conversation


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user", _("User")
        ASSISTANT = "assistant", _("Assistant")

    class Strategy(models.TextChoices):
        DIRECT = "direct", _("Direct")
        REWRITE = "rewrite", _("Rewrite")
        MULTI_STEP = "multi_step", _("Multi-step")

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages", verbose_name=_("conversation")
    )
    role = models.CharField(_("role"), max_length=16, choices=Role.choices)
    content = models.TextField(_("content"), blank=True)
    strategy = models.CharField(_("strategy"), max_length=16, choices=Strategy.choices, blank=True)
    rewrite = models.TextField(_("rewritten question"), blank=True)
    plan = models.JSONField(_("plan"), default=list, blank=True)
    citations = models.JSONField(_("citations"), default=list, blank=True)
    attachments = models.JSONField(_("attachments"), default=list, blank=True)
    timings = models.JSONField(_("timings"), default=dict, blank=True)
    abstain = models.BooleanField(_("abstained"), default=False)
    # How the answer was made (assistant/answering/modes.py: evidence, choose, phrase, passages)
    # and every decision it made on the way, stage by stage (assistant/answering/decisions.py):
    # what drives `abstain`, the chat's "how it was found" and analytics' "why it declined".
    mode = models.CharField(_("answer mode"), max_length=16, blank=True)
    decisions = models.JSONField(_("decisions"), default=list, blank=True)
    # The evidence shown before the answer (each quote with its citation and confidence), and
    # a declined answer's closest passages (links to their pages).
    evidence = models.JSONField(_("evidence"), default=list, blank=True)
    closest = models.JSONField(_("closest passages"), default=list, blank=True)
    # An answer's collections searched: [{"id", "name", "version"}] as they were then, with
    # the number of the index version each was searched in.
    searched = models.JSONField(_("collections searched"), default=list, blank=True)
    # The models that made the answer, by role: {"chat", "embedding", "rerank"} ids.
    models_used = models.JSONField(_("models"), default=dict, blank=True)
    # Why an answer stopped early (cancelled, model error); the partial answer is kept.
    error = models.TextField(_("error"), blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["pk"]
        verbose_name = _("message")
        verbose_name_plural = _("messages")

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:60]}"


class ClockTimestamp(models.Func):
    """PostgreSQL's clock_timestamp(): the time of each row's insert, distinct within one
    transaction (now() is the transaction's start), so rows written together keep their order."""

    template = "clock_timestamp()"
    output_field = models.DateTimeField()


class MemoryHistory(models.Model):
    """mem0's change log of each memory (its "history" table, which mem0 keeps in SQLite), in
    the portal's database so that every web and worker process, on any machine, reads and
    writes the same one. Written and read by assistant.memory.history only (raw SQL on mem0's
    connection pool, like the memories themselves): mem0's columns as mem0 gives them, its
    timestamps kept as its ISO-8601 strings. A memory's rows belong to the memory's user
    (memory_mem0.payload->>'user_id'); the service shows them to that user only."""

    id = models.UUIDField(primary_key=True)
    memory_id = models.TextField(_("memory"), db_index=True)
    old_memory = models.TextField(_("old text"), null=True)  # noqa: DJ001 (mem0 tells None from "")
    new_memory = models.TextField(_("new text"), null=True)  # noqa: DJ001 (mem0 tells None from "")
    event = models.CharField(_("event"), max_length=16)  # ADD, UPDATE, DELETE
    created_at = models.TextField(_("created"), null=True)  # noqa: DJ001 (mem0 tells None from "")
    updated_at = models.TextField(_("updated"), null=True)  # noqa: DJ001 (mem0 tells None from "")
    is_deleted = models.BooleanField(_("deleted"), default=False)
    actor_id = models.TextField(_("actor"), null=True)  # noqa: DJ001 (mem0 tells None from "")
    role = models.TextField(_("role"), null=True)  # noqa: DJ001 (mem0 tells None from "")
    recorded_at = models.DateTimeField(_("recorded"), db_default=ClockTimestamp())

    class Meta:
        db_table = "memory_history"
        verbose_name = _("memory change")
        verbose_name_plural = _("memory changes")

    def __str__(self) -> str:
        return f"{self.event} {self.memory_id}"


class MemoryMessage(models.Model):
    """mem0's copy of the last messages of each scope ("user_id=<uid>"), which it gives its
    extraction as context: at most ten per scope, mem0's "messages" table."""

    id = models.UUIDField(primary_key=True)
    session_scope = models.TextField(_("scope"), db_index=True)
    role = models.TextField(_("role"), null=True)  # noqa: DJ001 (mem0 tells None from "")
    content = models.TextField(_("content"), null=True)  # noqa: DJ001 (mem0 tells None from "")
    name = models.TextField(_("name"), null=True)  # noqa: DJ001 (mem0 tells None from "")
    created_at = models.TextField(_("created"), null=True)  # noqa: DJ001 (mem0 tells None from "")
    recorded_at = models.DateTimeField(_("recorded"), db_default=ClockTimestamp())

    class Meta:
        db_table = "memory_messages"
        verbose_name = _("remembered message")
        verbose_name_plural = _("remembered messages")

    def __str__(self) -> str:
        return f"{self.session_scope}: {(self.content or '')[:60]}"

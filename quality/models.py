"""What the quality loop keeps: people's feedback on answers, each collection's golden
questions, and evaluation runs of an index version on them (docs/quality.md)."""

from __future__ import annotations

from typing import Any

from django.conf import settings as conf
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from assistant.models import Message
from assistant.retrieval.evaluation import LANGS, TYPES, UNANSWERABLE
from common.runs import Run
from knowledge.models import Collection, Document, IndexVersion
from knowledge.principal import about_token_collections
from portal.typing import AnyUser


class FeedbackQuerySet(models.QuerySet["Feedback"]):
    def visible_to(self, user: AnyUser) -> FeedbackQuerySet:
        """Your own feedback, and the feedback on answers that searched a collection you manage;
        for a token limited to some collections, only the feedback on answers that searched
        them alone (knowledge/principal.py)."""
        if not user.is_authenticated:
            return self.none()
        managed = Collection.objects.manageable_by(user).values("pk")
        found = self.filter(Q(user=user) | Q(collections__in=managed)).distinct()
        return about_token_collections(found, user, "collections")


class Feedback(models.Model):
    """A person's verdict on one answer, with what the answer was made of when it was given
    (the message may change or go; the snapshot stays)."""

    class Rating(models.TextChoices):
        UP = "up", _("Helpful")
        DOWN = "down", _("Not helpful")

    message = models.OneToOneField(
        Message, null=True, on_delete=models.SET_NULL, related_name="feedback", verbose_name=_("answer")
    )
    user = models.ForeignKey(conf.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", verbose_name=_("user"))
    rating = models.CharField(_("rating"), max_length=4, choices=Rating.choices)
    comment = models.TextField(_("comment"), blank=True)
    # "The right answer is … on page …": a correction that can become a golden question.
    correct_answer = models.TextField(_("right answer"), blank=True)
    correct_document = models.ForeignKey(
        Document, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", verbose_name=_("right document")
    )
    correct_page = models.PositiveIntegerField(_("right page, slide or minute"), null=True, blank=True)
    # The snapshot of the answer.
    question = models.TextField(_("question"))
    answer = models.TextField(_("answer"), blank=True)
    citations = models.JSONField(_("citations"), default=list, blank=True)
    strategy = models.CharField(_("strategy"), max_length=16, blank=True)
    abstain = models.BooleanField(_("abstained"), default=False)
    timings = models.JSONField(_("timings"), default=dict, blank=True)
    versions = models.JSONField(_("index versions"), default=list, blank=True)  # [{"collection", "version"}]
    models_used = models.JSONField(_("models"), default=dict, blank=True)  # {role: model id}
    collections = models.ManyToManyField(Collection, blank=True, related_name="+", verbose_name=_("collections"))
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    objects = FeedbackQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at", "-pk"]
        verbose_name = _("feedback")
        verbose_name_plural = _("feedback")

    def __str__(self) -> str:
        return f"{self.get_rating_display()}: {self.question[:60]}"


# What the pages call the evaluation's question types and languages (their codes are the
# public evaluation's, eval/questions.jsonl).
KIND_LABELS = {
    "fact": _("fact"),
    "table": _("table"),
    "picture": _("picture"),
    "multihop": _("multi-step"),
    "followup": _("follow-up"),
    "unanswerable": _("unanswerable"),
    "text": _("text"),
    "image": _("image"),
    "scan": _("scan"),
    "number": pgettext_lazy("question type", "number"),
}
LANGUAGE_LABELS = {"zh": _("Chinese"), "en": _("English")}


class GoldenQuestion(models.Model):
    """A question whose right page is known: every index version of the collection is
    measured on these before it serves anyone. The fields are the public evaluation's
    (eval/questions.jsonl): `key` is its "id", `gold` its [{"file", "page"}]."""

    KINDS = [(kind, KIND_LABELS.get(kind, kind)) for kind in TYPES]
    LANGUAGES = [(lang, LANGUAGE_LABELS.get(lang, lang)) for lang in LANGS]

    collection = models.ForeignKey(
        Collection, on_delete=models.CASCADE, related_name="golden_questions", verbose_name=_("collection")
    )
    key = models.CharField(_("id"), max_length=100)
    question = models.TextField(_("question"))
    lang = models.CharField(_("language"), max_length=5, choices=LANGUAGES)
    kind = models.CharField(_("kind"), max_length=16, choices=KINDS, default="fact")
    gold = models.JSONField(_("expected pages"), default=list, blank=True)  # [{"file", "page"}]
    keys = models.JSONField(_("answer keys"), default=list, blank=True)  # ["value", ["spelling", ...]]
    history = models.JSONField(_("earlier turns"), default=list, blank=True)  # [{"role", "content"}]
    feedback = models.ForeignKey(
        Feedback, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", verbose_name=_("from feedback")
    )
    created_by = models.ForeignKey(
        conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        ordering = ["key", "pk"]
        verbose_name = _("golden question")
        verbose_name_plural = _("golden questions")
        constraints = [models.UniqueConstraint(fields=["collection", "key"], name="golden_question_unique_key")]

    def __str__(self) -> str:
        return f"{self.key}: {self.question[:60]}"

    @property
    def should_abstain(self) -> bool:
        return self.kind == UNANSWERABLE

    def files(self) -> set[str]:
        return {str(entry.get("file", "")) for entry in self.gold if isinstance(entry, dict)}

    def as_line(self) -> dict[str, Any]:
        """The question as one line of the public evaluation's JSON Lines format."""
        return {
            "id": self.key,
            "question": self.question,
            "lang": self.lang,
            "type": self.kind,
            "gold": self.gold,
            "keys": self.keys,
            "history": self.history,
        }


class EvaluationRun(Run):
    """One evaluation of an index version on the collection's golden questions; a gate run
    also evaluates the version serving then (`baseline`) and decides the flip (common.runs)."""

    task_name = "quality.evaluate_version"

    class Purpose(models.TextChoices):
        MANUAL = "manual", _("Asked for")
        GATE = "gate", _("Before a flip")

    class Decision(models.TextChoices):
        NONE = "", _("None")
        FLIPPED = "flipped", _("Flipped")
        HELD = "held", _("Held back")
        FLIPPED_ANYWAY = "flipped_anyway", _("Flipped anyway")

    collection = models.ForeignKey(
        Collection, on_delete=models.CASCADE, related_name="evaluation_runs", verbose_name=_("collection")
    )
    # Numbers are kept beside the links: results outlive pruned versions.
    version = models.ForeignKey(
        IndexVersion, null=True, on_delete=models.SET_NULL, related_name="+", verbose_name=_("index version")
    )
    version_number = models.PositiveIntegerField(_("version"))
    baseline = models.ForeignKey(
        IndexVersion,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("compared with"),
    )
    baseline_number = models.PositiveIntegerField(_("compared with version"), null=True, blank=True)
    purpose = models.CharField(_("purpose"), max_length=8, choices=Purpose.choices, default=Purpose.MANUAL)
    answers = models.BooleanField(_("answers scored"), default=False)
    progress = models.PositiveIntegerField(_("questions done"), default=0)
    total = models.PositiveIntegerField(_("questions"), default=0)
    stale = models.PositiveIntegerField(_("stale questions"), default=0)
    # {"version": by_slice of retrieval means, "baseline": the same, "answers": answer_summary}
    summary = models.JSONField(_("summary"), default=dict, blank=True)
    per_question = models.JSONField(_("per question"), default=list, blank=True)
    drops = models.JSONField(_("drops in points"), default=dict, blank=True)  # metric: baseline - version
    decision = models.CharField(_("decision"), max_length=16, choices=Decision.choices, blank=True)
    seconds = models.FloatField(_("seconds"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name = _("evaluation run")
        verbose_name_plural = _("evaluation runs")

    def __str__(self) -> str:
        return f"{self.collection} v{self.version_number} ({self.status})"

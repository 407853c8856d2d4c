from __future__ import annotations

from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from common.runs import Run
from ingestion.failing import fail_document
from knowledge.models import Document


class IngestionRun(Run):
    """One piece of background ingestion work and its outcome (common.runs): progress and a
    heartbeat recorded page by page, a readable error when it fails."""

    class Kind(models.TextChoices):
        INGEST = "ingest", _("Ingest")
        REINDEX = "reindex", _("Reindex")
        DELETE = "delete", _("Delete")
        SYNC = "sync", _("Folder sync")

    task_name = "ingestion.ingest_document"

    collection = models.ForeignKey(
        "knowledge.Collection", on_delete=models.CASCADE, related_name="runs", verbose_name=_("collection")
    )
    document = models.ForeignKey(
        "knowledge.Document",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="runs",
        verbose_name=_("document"),
    )
    index_version = models.ForeignKey(
        "knowledge.IndexVersion",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="runs",
        verbose_name=_("index version"),
    )
    kind = models.CharField(_("kind"), max_length=10, choices=Kind.choices, default=Kind.INGEST)
    progress = models.PositiveIntegerField(_("pages done"), default=0)
    total = models.PositiveIntegerField(_("pages"), null=True, blank=True)
    counts = models.JSONField(_("counts"), default=dict, blank=True)
    # Seconds and calls per stage of the run (ingestion.stages): where its time went.
    stages = models.JSONField(_("time per stage"), default=dict, blank=True)
    traceback = models.TextField(blank=True)
    cancel_requested = models.BooleanField(_("cancel requested"), default=False)
    # A long document's later pages, split off for other workers (ingestion.pipeline): a part
    # reads pages first_page to last_page of the document its run (`part_of`) was started for.
    part_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="parts", verbose_name=_("part of")
    )
    first_page = models.PositiveIntegerField(_("first page"), null=True, blank=True)
    last_page = models.PositiveIntegerField(_("last page"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["collection", "status"], name="run_collection_status")]
        verbose_name = _("ingestion run")
        verbose_name_plural = _("ingestion runs")

    def __str__(self) -> str:
        pages = f" p. {self.first_page}–{self.last_page}" if self.last_page else ""
        return f"{self.get_kind_display()} {self.document or self.collection}{pages} ({self.status})"

    def unfinished(self) -> str:
        """A run that ingests a whole document succeeds only with the document ready (the
        parts of a split one: the last part to end finishes it, ingestion.pipeline); a
        document deleted meanwhile leaves nothing to disagree with."""
        if self.kind != self.Kind.INGEST or self.document_id is None or self.last_page is not None:
            return ""
        status = Document.objects.filter(pk=self.document_id).values_list("status", flat=True).first()
        if status is None or status == Document.Status.READY:
            return ""
        return gettext("The run ended without making the document ready (it was left %(status)s); run it again.") % {
            "status": Document.Status(status).label
        }

    def failed_unfinished(self, reason: str) -> None:
        if self.document is not None:
            waiting = (Document.Status.PENDING, Document.Status.PROCESSING)
            fail_document(self.document, reason, self.pk, only_from=waiting)


class Finding(models.Model):
    """Something the reconciler (ingestion.reconcile) found stuck and what it did about it: sent
    it back (a run queued again or anew) with the reason, stopped it, finished it, or, after
    PORTAL_RECONCILE_TRIES of the same finding, failed it with a message a person can act on."""

    class Kind(models.TextChoices):
        RUN_SILENT = "run_silent", _("Run without a heartbeat")
        RUN_LOST = "run_lost", _("Run queued but never sent")
        DOCUMENT_STUCK = "document_stuck", _("Document waiting with no run")
        PART_LEFT = "part_left", _("Part of a split document left behind")
        VERSION_IDLE = "version_idle", _("Index version building with nothing left to do")

    class Outcome(models.TextChoices):
        SENT_BACK = "sent_back", _("Sent back")
        STOPPED = "stopped", _("Stopped")
        FINISHED = "finished", _("Finished")
        FAILED = "failed", _("Failed")

    kind = models.CharField(_("kind"), max_length=20, choices=Kind.choices)
    outcome = models.CharField(_("outcome"), max_length=10, choices=Outcome.choices)
    reason = models.TextField(_("reason"))
    # Which try of this finding on this subject it was (1 to PORTAL_RECONCILE_TRIES; one more fails it).
    attempt = models.PositiveSmallIntegerField(_("try"))
    collection = models.ForeignKey(
        "knowledge.Collection", on_delete=models.CASCADE, related_name="+", verbose_name=_("collection")
    )
    document = models.ForeignKey(
        "knowledge.Document", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    run = models.ForeignKey(
        IngestionRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="findings", verbose_name=_("run")
    )
    index_version = models.ForeignKey(
        "knowledge.IndexVersion", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(_("found"), auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name = _("reconciler finding")
        verbose_name_plural = _("reconciler findings")

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.get_outcome_display()} ({self.attempt})"


class DerivedText(models.Model):
    """What a model read from one input (OCR of an image, speech of a clip, a vision caption),
    cached by the input's hash: re-ingesting a changed file, rebuilding an index version or
    re-running a failed document never pays twice for the same picture or clip."""

    class Task(models.TextChoices):
        OCR = "ocr", _("OCR")
        SPEECH = "speech", _("Speech")
        CAPTION = "caption", _("Caption")
        TAGS = "tags", _("Picture tags")

    task = models.CharField(_("task"), max_length=10, choices=Task.choices)
    model_id = models.CharField(_("model"), max_length=200)
    input_sha256 = models.CharField(max_length=64)
    output = models.JSONField(_("output"))
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["task", "model_id", "input_sha256"], name="derived_text_unique")]
        verbose_name = _("derived text")
        verbose_name_plural = _("derived texts")

    def __str__(self) -> str:
        return f"{self.task} {self.input_sha256[:12]} by {self.model_id}"

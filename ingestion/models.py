from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class IngestionRun(models.Model):
    """One piece of background ingestion work and its outcome (NetBox's Job): claimed with a
    conditional UPDATE, progress recorded page by page, a readable error when it fails."""

    class Kind(models.TextChoices):
        INGEST = "ingest", _("Ingest")
        REINDEX = "reindex", _("Reindex")
        DELETE = "delete", _("Delete")
        SYNC = "sync", _("Folder sync")

    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        RUNNING = "running", _("Running")
        SUCCEEDED = "succeeded", _("Succeeded")
        FAILED = "failed", _("Failed")
        CANCELLED = "cancelled", _("Cancelled")

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
    status = models.CharField(_("status"), max_length=10, choices=Status.choices, default=Status.QUEUED)
    progress = models.PositiveIntegerField(_("pages done"), default=0)
    total = models.PositiveIntegerField(_("pages"), null=True, blank=True)
    counts = models.JSONField(_("counts"), default=dict, blank=True)
    # Seconds and calls per stage of the run (ingestion.stages): where its time went.
    stages = models.JSONField(_("time per stage"), default=dict, blank=True)
    error = models.TextField(_("error"), blank=True)
    traceback = models.TextField(blank=True)
    cancel_requested = models.BooleanField(_("cancel requested"), default=False)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    # Touched on claim and after every page: a running run whose heartbeat stops is stale.
    heartbeat_at = models.DateTimeField(_("last sign of life"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["collection", "status"], name="run_collection_status")]
        verbose_name = _("ingestion run")
        verbose_name_plural = _("ingestion runs")

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.document or self.collection} ({self.status})"


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

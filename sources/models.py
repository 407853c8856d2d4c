"""A collection's sources (a server folder, a Git repository, a WebDAV share, an S3 bucket),
the files each one brought in, and each sync run."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from common.runs import Run
from sources import crypto
from sources.remotes.base import Credentials, Location


class Source(models.Model):
    class Kind(models.TextChoices):
        FOLDER = "folder", _("Server folder")
        GIT = "git", _("Git repository")
        WEBDAV = "webdav", _("WebDAV share")
        S3 = "s3", _("S3 bucket")

    collection = models.ForeignKey(
        "knowledge.Collection", on_delete=models.CASCADE, related_name="sources", verbose_name=_("collection")
    )
    name = models.CharField(_("name"), max_length=100)
    kind = models.CharField(_("kind"), max_length=10, choices=Kind.choices)
    # The folder's path, the repository's URL, the WebDAV folder's URL or the S3 endpoint.
    url = models.CharField(_("address"), max_length=1000, blank=True)
    branch = models.CharField(_("branch"), max_length=200, blank=True)
    bucket = models.CharField(_("bucket"), max_length=63, blank=True)
    region = models.CharField(_("region"), max_length=40, blank=True)
    # A folder inside the source: Git subpath, S3 key prefix, sub-folder.
    prefix = models.CharField(_("folder in the source"), max_length=500, blank=True)
    # Where the source's files go in the collection ("" = its top); documents are at
    # <target>/<path in the source>.
    target = models.CharField(_("folder in the collection"), max_length=200, blank=True)
    include = models.TextField(_("include"), blank=True)  # globs, one per line; empty = all
    exclude = models.TextField(_("exclude"), blank=True)
    # "" (only by hand), an interval ("30m", "6h", "1d") or five cron fields ("0 3 * * 1-5").
    schedule = models.CharField(_("schedule"), max_length=100, blank=True)
    # A page for each file, e.g. https://git.example.com/docs/src/branch/{branch}/{path}.
    link_template = models.CharField(_("link template"), max_length=500, blank=True)
    credentials_token = models.TextField(blank=True, editable=False)  # Fernet, see crypto.py
    # Credentials belong to the address they were given for: a change of kind, scheme,
    # host, port or bucket removes them (sources.actions.do_save_source) and sets this, so
    # that the source does not sync until they are entered again or removed on purpose.
    credentials_cleared = models.BooleanField(
        _("credentials removed by a change of address"), default=False, editable=False
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    next_sync_at = models.DateTimeField(_("next sync"), null=True, blank=True)
    last_sync_at = models.DateTimeField(_("last sync"), null=True, blank=True)

    class Meta:
        ordering = ["collection", "name"]
        constraints = [models.UniqueConstraint(fields=["collection", "name"], name="source_unique_name")]
        verbose_name = _("source")
        verbose_name_plural = _("sources")

    def __str__(self) -> str:
        return self.name

    @property
    def has_credentials(self) -> bool:
        return bool(self.credentials_token)

    def credentials(self) -> Credentials:
        """The credentials to log in with (empty: none). CredentialsError when they cannot be
        given: no key opens them, or a change of address removed them and nobody has
        entered new ones or chosen to go without (the sync then fails saying so, rather than
        reading the new address anonymously)."""
        if self.credentials_cleared and not self.credentials_token:
            raise crypto.CredentialsError(
                gettext(
                    "This source's address changed, so the credentials stored for the old address were removed: "
                    "enter them again, or remove them on purpose (“Remove the stored credentials”) to sync "
                    "without logging in."
                )
            )
        return crypto.decrypt(self.credentials_token)

    def set_credentials(self, credentials: Credentials) -> None:
        self.credentials_token = crypto.encrypt(credentials)

    def location(self) -> Location:
        return Location(
            kind=self.kind,
            url=self.url,
            branch=self.branch,
            prefix=self.prefix,
            bucket=self.bucket,
            region=self.region,
            link_template=self.link_template,
            workdir=settings.SOURCE_WORKDIR / str(self.pk),
        )

    def document_path(self, path: str) -> str:
        """Where a file of the source is kept in the collection."""
        target = self.target.strip("/")
        return f"{target}/{path}" if target else path


class SourceFile(models.Model):
    """A file the source brought in: its path there, the change signal it had when it was
    last fetched, and its document. An unchanged signal means nothing is fetched."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="files", verbose_name=_("source"))
    document = models.OneToOneField(
        "knowledge.Document", on_delete=models.CASCADE, related_name="source_file", verbose_name=_("document")
    )
    path = models.CharField(_("path in the source"), max_length=1024)
    signal = models.CharField(_("change signal"), max_length=200)
    content_id = models.CharField(max_length=100, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "path"], name="source_file_unique_path")]
        verbose_name = _("source file")
        verbose_name_plural = _("source files")

    def __str__(self) -> str:
        return self.path


class SyncRun(Run):
    """One sync of a source (common.runs): how far it got, what it found, and why files were
    skipped."""

    task_name = "sources.sync_source"

    class Trigger(models.TextChoices):
        SCHEDULE = "schedule", _("Schedule")
        MANUAL = "manual", _("By hand")

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="runs", verbose_name=_("source"))
    trigger = models.CharField(_("started by"), max_length=10, choices=Trigger.choices, default=Trigger.MANUAL)
    # listed, added, changed, unchanged, renamed, deleted, failed
    counts = models.JSONField(_("counts"), default=dict, blank=True)
    failures = models.JSONField(_("failed files"), default=list, blank=True)  # [{"path", "error"}]
    progress = models.PositiveIntegerField(_("files done"), default=0)
    total = models.PositiveIntegerField(_("files"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["source", "status"], name="sync_run_source_status")]
        verbose_name = _("sync run")
        verbose_name_plural = _("sync runs")

    def __str__(self) -> str:
        return f"{self.source} {self.created_at:%Y-%m-%d %H:%M} ({self.status})"

    def as_event(self) -> dict[str, Any]:
        """What the collection's socket hears: everyone who sees the collection listens there,
        so no error text (it may name hosts and paths only the collection's admins see)."""
        return {
            "type": "source.progress",
            "source": self.source_id,
            "run": self.pk,
            "status": self.status,
            "progress": self.progress,
            "total": self.total,
            "counts": self.counts,
        }

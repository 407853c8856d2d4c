"""Background runs, one way for every app (NetBox's Job, healthchecks' sendalerts): a row
that says what a job is doing, claimed by one worker with a conditional UPDATE, kept alive
by its heartbeat, and queued again when its worker stops giving signs of life.

A run's task is sent by name once the transaction that created the run commits
(`send_on_commit`): the code that creates runs never imports the tasks that execute them, so
tasks may import actions and runs freely without a circle.

The rule for a lost worker is one: a running run whose heartbeat is older than
PORTAL_RUN_STALE_MINUTES is put back to queued, its error saying so, and its task is sent
again (beat's `portal.reconcile`, ingestion/reconcile.py). A claim takes queued runs only, so a run is
never executed twice at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db import models, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from common import metrics

log = logging.getLogger(__name__)


class Run(models.Model):
    """What every kind of run records; an app's run adds what it is about (a document, a
    source, an index version) and what it counts."""

    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        RUNNING = "running", _("Running")
        SUCCEEDED = "succeeded", _("Succeeded")
        FAILED = "failed", _("Failed")
        CANCELLED = "cancelled", _("Cancelled")

    status = models.CharField(_("status"), max_length=10, choices=Status.choices, default=Status.QUEUED)
    # Steps done of `total` (pages, files, questions: a run names its own in its fields).
    progress = models.PositiveIntegerField(_("done"), default=0)
    total = models.PositiveIntegerField(_("total"), null=True, blank=True)
    error = models.TextField(_("error"), blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("requested by"),
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    # Touched on claim and as the run goes: a running run whose heartbeat stops is stale.
    heartbeat_at = models.DateTimeField(_("last sign of life"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)

    # The Celery task that executes a run of this kind, called with the run's id.
    task_name = ""

    class Meta:
        abstract = True

    def send(self) -> None:
        """Queue the run's task once the current transaction commits."""
        send_on_commit(self.task_name, self.pk)

    def unfinished(self) -> str:
        """Why this run may not be recorded as succeeded, "" when it may: a kind whose success
        means something of what it ran for says so here (an ingest run's document is ready),
        and `end_run` then ends it failed with this reason instead."""
        return ""

    def failed_unfinished(self, reason: str) -> None:
        """What it ran for is told that the run ended failed for `reason` (`unfinished`): a
        document left pending fails with it, so that it never waits on a run that has ended."""


R = TypeVar("R", bound=Run)


def end_run(run: Run, status: str, *, error: str = "", only_from: Sequence[str] = (), **fields: Any) -> bool:
    """The one way every kind of run ends: its status (succeeded, failed, cancelled), error,
    finish time and its kind's own `fields` (counts, summaries…) in one UPDATE, set on `run`
    too. `only_from`: only while its status is still one of these (a run another worker or
    check may end meanwhile); False when it was not ended for that. A success is recorded only
    when what the run was for agrees (`Run.unfinished`); otherwise the run ends failed with the
    reason, counted on /metrics (portal_errors{kind="run", name="unfinished"}), and its
    subject is failed with it: a run can never succeed while its document is left pending."""
    if status == Run.Status.SUCCEEDED:
        reason = run.unfinished()
        if reason:
            log.error("%s %s ended without its work done: %s", type(run).__name__, run.pk, reason)
            metrics.ERRORS.labels("run", "unfinished").inc()
            status, error = Run.Status.FAILED, reason
            run.failed_unfinished(reason)
    values = {"status": status, "error": error, "finished_at": timezone.now(), **fields}
    rows = type(run).objects.filter(pk=run.pk)  # type: ignore[attr-defined]
    if only_from:
        rows = rows.filter(status__in=only_from)
    if not rows.update(**values):
        return False
    for name, value in values.items():
        setattr(run, name, value)
    return True


def send_on_commit(task_name: str, *args: Any, queue: str | None = None) -> None:
    """Send the task by name once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: send_now(task_name, *args, queue=queue))


def send_now(task_name: str, *args: Any, queue: str | None = None) -> None:
    """Send the task by name; with no queue, to the one portal/celery.py routes it to."""
    from celery import current_app

    current_app.send_task(task_name, args=args, queue=queue)


def claim(run: Run, **reset: Any) -> bool:
    """Queued → running, by one worker only; False when another worker has it or it ended.
    `reset` sets more fields in the same UPDATE (a run started again counts from zero)."""
    now = timezone.now()
    model = type(run)
    updated = model.objects.filter(pk=run.pk, status=Run.Status.QUEUED).update(  # type: ignore[attr-defined]
        status=Run.Status.RUNNING, started_at=now, heartbeat_at=now, finished_at=None, error="", **reset
    )
    if updated == 1:
        run.refresh_from_db()
    return updated == 1


def stale_after() -> timedelta:
    return timedelta(minutes=settings.RUN_STALE_MINUTES)


def requeue_stale(runs: QuerySet[R], send: Callable[[R], None], older_than: timedelta | None = None) -> list[R]:
    """The running ones of `runs` with no sign of life for `older_than` (by default
    PORTAL_RUN_STALE_MINUTES): their worker stopped (killed, out of memory, machine lost).
    Each is put back to queued, with an error saying so until it is claimed again, and
    `send` queues its task once that is committed."""
    cutoff = timezone.now() - (older_than or stale_after())
    silent = Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True)
    requeued = []
    for run in runs.filter(silent, status=Run.Status.RUNNING):
        message = _("Its worker stopped giving signs of life; it was queued again.")
        with transaction.atomic():
            if runs.filter(pk=run.pk, status=Run.Status.RUNNING).update(
                status=Run.Status.QUEUED, error=message, heartbeat_at=timezone.now()
            ):
                run.refresh_from_db()
                send(run)
                requeued.append(run)
    return requeued

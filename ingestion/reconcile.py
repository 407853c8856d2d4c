"""The reconciler: ingestion that is stuck, found and sent back. Beat runs it every minute
(portal.reconcile) and operators with `manage.py doctor` (`--fix` mends). Each finding is a
`Problem`; `mend()` acts on it once and records a `Finding` (the reason, which try it was,
what was done), counted on /metrics and shown in the admin and, as a note, on the document.
The same finding on the same subject is sent back at most PORTAL_RECONCILE_TRIES times; the
next time it is failed with a message a person can act on, so nothing loops for ever.

What it finds (Finding.Kind):
- run_silent: a running run whose heartbeat stopped (its worker was killed): queued again by
  the one rule of common.runs (`requeue_stale`);
- run_lost: a queued run whose task message the broker lost (Redis restarted without its
  data): sent again. Looked for only while the broker's ingest queues are empty, since a
  message waiting there may be that run's;
- part_left: runs of a split document still to do while another run of the same document
  failed or was cancelled (for longer than PORTAL_RUN_STALE_MINUTES, past a task's own
  retries), or after the document was ingested anew: stopped;
- document_stuck: a document pending or processing with no queued or running run, e.g. its
  run succeeded without finishing it: a new run is queued (actions.do_rerun_document). One
  whose last run was cancelled is marked failed, as the run says, not run against the wish;
- version_idle: an index version building, not yet built, while no run of its collection is
  queued or running: its build is completed when it covers everything, else the documents it
  lacks are ingested again, and after the tries it is marked failed (the active one serves).

A ready document with a queued or running run is being ingested again, not stuck; a failed
one has its reason and waits for a person. Runs are mended before documents, so a document
whose run is only silent or lost is not also counted as stuck.

Every mend checks its finding again as it writes: the reconciler may run in beat and in
`manage.py doctor --fix` at once, and work goes on meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from common import metrics
from common.runs import end_run, requeue_stale, stale_after
from ingestion import actions
from ingestion.failing import fail_document
from ingestion.models import Finding, IngestionRun
from ingestion.runs import enqueue_run
from ingestion.versions import complete_build_if_done
from knowledge.models import Document, IndexedDocument, IndexVersion

LIVE = (IngestionRun.Status.QUEUED, IngestionRun.Status.RUNNING)
WAITING = (Document.Status.PENDING, Document.Status.PROCESSING)
ENDED_BADLY = (IngestionRun.Status.FAILED, IngestionRun.Status.CANCELLED)
INGEST_QUEUES = ("ingest", "quick")  # where ingestion runs' messages wait (ingestion.runs.enqueue_run)


@dataclass(frozen=True)
class Problem:
    """One thing found stuck, and why, in words that follow “re-queued after …”."""

    kind: Finding.Kind
    reason: str
    collection_id: int
    document: Document | None = None
    run: IngestionRun | None = None
    version: IndexVersion | None = None

    def subject(self) -> str:
        """What is stuck, for `manage.py doctor`."""
        if self.version is not None:
            return _("index version %(number)d of collection %(collection)d") % {
                "number": self.version.number,
                "collection": self.collection_id,
            }
        if self.run is not None:
            return _("run %(run)d (%(what)s)") % {"run": self.run.pk, "what": self.run}
        assert self.document is not None
        return _("document %(id)d “%(name)s”") % {"id": self.document.pk, "name": self.document.rel_path}


def find(*, broker_idle: bool) -> list[Problem]:
    """Everything stuck now, runs first. `broker_idle`: the broker's ingest queues are empty
    (`broker_idle()`), so queued runs whose message is gone can be told apart."""
    return [
        *silent_runs(),
        *(lost_runs() if broker_idle else []),
        *left_parts(),
        *stuck_documents(),
        *idle_versions(),
    ]


def reconcile(*, broker_idle: bool) -> list[Finding]:
    """Find and mend everything stuck; the findings acted on (one may have mended itself)."""
    return [finding for problem in find(broker_idle=broker_idle) if (finding := mend(problem)) is not None]


def mend(problem: Problem) -> Finding | None:
    """Act on one finding, if it still holds: the Finding recorded, or None."""
    return _MENDS[problem.kind](problem)


# Finding


def silent_runs() -> list[Problem]:
    """Running runs with no sign of life for PORTAL_RUN_STALE_MINUTES."""
    cutoff = timezone.now() - stale_after()
    silent = IngestionRun.objects.filter(status=IngestionRun.Status.RUNNING, document__isnull=False).filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True)
    )
    reason = _("its worker gave no sign of life for %(minutes)d minutes") % {"minutes": settings.RUN_STALE_MINUTES}
    return [_run_problem(Finding.Kind.RUN_SILENT, reason, run) for run in silent.select_related("document")]


def lost_runs() -> list[Problem]:
    """Queued runs older than PORTAL_RUN_STALE_MINUTES and not sent again since (a queued run's
    `heartbeat_at` is when it was last sent again). Call it only while `broker_idle()`."""
    cutoff = timezone.now() - stale_after()
    lost = IngestionRun.objects.filter(
        status=IngestionRun.Status.QUEUED, document__isnull=False, created_at__lt=cutoff
    ).filter(Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=cutoff))
    reason = _("its task message was lost (the broker restarted or was emptied)")
    return [_run_problem(Finding.Kind.RUN_LOST, reason, run) for run in lost.select_related("document")]


def left_parts() -> list[Problem]:
    """Runs of a split document still to do after another of its runs failed or was cancelled
    long enough ago, or after the document was ingested anew."""
    cutoff = timezone.now() - stale_after()
    split = IngestionRun.objects.filter(
        status__in=LIVE, cancel_requested=False, last_page__isnull=False, document__isnull=False
    )
    found = []
    for run in split.select_related("document", "part_of"):
        root = run.part_of or run
        family = IngestionRun.objects.filter(Q(pk=root.pk) | Q(part_of_id=root.pk))
        if family.filter(status__in=ENDED_BADLY, finished_at__lt=cutoff).exists():
            reason = _("another part of the same document failed or was cancelled")
        elif IngestionRun.objects.filter(
            document=run.document, part_of=None, kind=IngestionRun.Kind.INGEST, created_at__gt=root.created_at
        ).exists():
            reason = _("the document was ingested anew meanwhile")
        else:
            continue
        found.append(_run_problem(Finding.Kind.PART_LEFT, reason, run))
    return found


def stuck_documents() -> list[Problem]:
    """Documents pending or processing with no queued or running run."""
    live = IngestionRun.objects.filter(document=OuterRef("pk"), status__in=LIVE)
    stuck = Document.objects.filter(status__in=WAITING).exclude(Exists(live))
    return [
        Problem(Finding.Kind.DOCUMENT_STUCK, _stuck_reason(_last_run(document)), document.collection_id, document)
        for document in stuck
    ]


def idle_versions() -> list[Problem]:
    """Index versions building, not yet built, with no run of their collection to do."""
    live = IngestionRun.objects.filter(collection=OuterRef("collection_id"), status__in=LIVE)
    idle = IndexVersion.objects.filter(status=IndexVersion.Status.BUILDING, built_at__isnull=True).exclude(Exists(live))
    reason = _("no run was left to build it")
    return [Problem(Finding.Kind.VERSION_IDLE, reason, version.collection_id, version=version) for version in idle]


def _run_problem(kind: Finding.Kind, reason: str, run: IngestionRun) -> Problem:
    return Problem(kind, reason, run.collection_id, run.document, run)


def _last_run(document: Document) -> IngestionRun | None:
    return IngestionRun.objects.filter(document=document).order_by("-created_at", "-pk").first()


def _stuck_reason(last: IngestionRun | None) -> str:
    if last is None:
        return _("it had no run")
    if last.status == IngestionRun.Status.CANCELLED:
        return _("its last run was cancelled")
    if last.status == IngestionRun.Status.FAILED:
        return _("its last run failed: %(error)s") % {"error": last.error or "—"}
    return _("its last run ended without finishing it")


def broker_idle() -> bool:
    """Whether no ingestion message waits in the broker (a worker may hold one it took)."""
    return not any(queue_waiting(queue) for queue in INGEST_QUEUES)


def queue_waiting(queue: str) -> int:
    """Messages waiting in a broker queue (not those a worker holds)."""
    from celery import current_app
    from kombu.exceptions import ChannelError

    with current_app.connection_for_read() as connection:
        try:
            declared = connection.default_channel.queue_declare(queue=queue, passive=True)  # type: ignore[attr-defined]
            return int(declared.message_count)
        except ChannelError:  # not declared (yet): nothing waits in it
            return 0


# Mending


def _mend_silent(problem: Problem) -> Finding | None:
    gave_up = _(
        "Its worker stopped %(tries)d times while working on it (killed, out of memory or its machine "
        "lost), so it was not queued again. Check the workers' memory and logs, then run it again."
    )
    return _mend_run(
        problem, gave_up, lambda run: bool(requeue_stale(IngestionRun.objects.filter(pk=run.pk), enqueue_run))
    )


def _mend_lost(problem: Problem) -> Finding | None:
    gave_up = _(
        "Its task was sent %(tries)d times and no worker took it. Check that the ingestion workers "
        "run and reach Redis (manage.py up starts them), then run it again."
    )
    return _mend_run(problem, gave_up, _send_again)


def _send_again(run: IngestionRun) -> bool:
    """A queued run's task sent again; False when it is no longer queued."""
    # Marked as sent (heartbeat_at) in the same UPDATE that checks it is still queued.
    if not IngestionRun.objects.filter(pk=run.pk, status=IngestionRun.Status.QUEUED).update(
        heartbeat_at=timezone.now()
    ):
        return False
    enqueue_run(run)  # sent at once: no transaction is open here
    return True


def _mend_run(problem: Problem, gave_up: str, send_back: Callable[[IngestionRun], bool]) -> Finding | None:
    """A silent or lost run sent back by `send_back` (False: it moved on meanwhile), or, once
    it has been sent back PORTAL_RECONCILE_TRIES times, failed with `gave_up` (its %(tries)d:
    the times it was sent)."""
    run = problem.run
    assert run is not None
    tries = _tries(problem)
    if tries >= settings.RECONCILE_TRIES:
        message = gave_up % {"tries": tries + 1}
        return _record(problem, Finding.Outcome.FAILED, tries, message) if _fail_run(run, message) else None
    if not send_back(run):
        return None
    return _record(problem, Finding.Outcome.SENT_BACK, tries)


def _mend_part(problem: Problem) -> Finding | None:
    run = problem.run
    assert run is not None
    message = _("Stopped by the portal's check: %(reason)s.") % {"reason": problem.reason}
    if not actions.do_cancel_run(run):
        return None
    # One still queued is ended now: its message may be long gone, and a later claim finds it ended.
    end_run(run, IngestionRun.Status.CANCELLED, error=message, only_from=(IngestionRun.Status.QUEUED,))
    return _record(problem, Finding.Outcome.STOPPED, 0, message)


def _mend_document(problem: Problem) -> Finding | None:
    assert problem.document is not None
    with transaction.atomic():
        # Locked as an upload locks it (it saves the row), so the two never cross.
        document = Document.objects.select_for_update().filter(pk=problem.document.pk, status__in=WAITING).first()
        if document is None or IngestionRun.objects.filter(document=document, status__in=LIVE).exists():
            return None
        last = _last_run(document)
        if last is not None and last.status == IngestionRun.Status.CANCELLED:
            message = last.error or _("Cancelled before the end; run it again to finish.")
            fail_document(document, message, last.pk)
            return _record(problem, Finding.Outcome.FAILED, 0, message)
        tries = _tries(problem, since=document.updated_at)
        if tries >= settings.RECONCILE_TRIES:
            message = _(
                "It was queued again %(tries)d times and no run finished it (the last time, %(reason)s). "
                "Run it again; if it stays stuck, delete it, upload it again and tell whoever runs the portal."
            ) % {"tries": tries, "reason": problem.reason}
            fail_document(document, message, last.pk if last else None)
            return _record(problem, Finding.Outcome.FAILED, tries, message)
        run = actions.do_rerun_document(document)
        return _record(problem, Finding.Outcome.SENT_BACK, tries, run=run)


def _mend_version(problem: Problem) -> Finding | None:
    version = problem.version
    assert version is not None
    live = IngestionRun.objects.filter(collection_id=version.collection_id, status__in=LIVE)
    if live.exists() or not IndexVersion.objects.filter(pk=version.pk, status=IndexVersion.Status.BUILDING).exists():
        return None
    complete_build_if_done(version)
    version.refresh_from_db()
    if version.built_at is not None:  # it covered everything: flipped, or handed to the gate
        return _record(problem, Finding.Outcome.FINISHED, 0)
    missing = list(_missing_documents(version))
    tries = _tries(problem)
    if tries >= settings.RECONCILE_TRIES:
        names = ", ".join(document.rel_path for document in missing[:5]) + ("…" if len(missing) > 5 else "")
        message = _(
            "Index version %(number)d could not index %(count)d document(s) (%(names)s) after %(tries)d "
            "tries, so it was marked failed; the active version keeps answering. Fix or delete those "
            "documents (each says why it failed), then reindex."
        ) % {"number": version.number, "count": len(missing), "names": names, "tries": tries}
        IndexVersion.objects.filter(pk=version.pk, status=IndexVersion.Status.BUILDING).update(
            status=IndexVersion.Status.FAILED
        )
        return _record(problem, Finding.Outcome.FAILED, tries, message)
    with transaction.atomic():
        for document in missing:
            actions.do_rerun_document(document)
        return _record(problem, Finding.Outcome.SENT_BACK, tries)


def _missing_documents(version: IndexVersion) -> list[Document]:
    """The documents the collection's active version serves that `version` does not yet."""
    served = IndexedDocument.objects.filter(index_version_id=version.collection.active_version_id)
    covered = IndexedDocument.objects.filter(index_version=version).values("document_id")
    return list(Document.objects.filter(pk__in=served.exclude(document_id__in=covered).values("document_id")))


_MENDS: dict[str, Callable[[Problem], Finding | None]] = {
    Finding.Kind.RUN_SILENT: _mend_silent,
    Finding.Kind.RUN_LOST: _mend_lost,
    Finding.Kind.PART_LEFT: _mend_part,
    Finding.Kind.DOCUMENT_STUCK: _mend_document,
    Finding.Kind.VERSION_IDLE: _mend_version,
}


def _tries(problem: Problem, since: object = None) -> int:
    """How often this finding was acted on for this subject before (since `since`)."""
    findings = Finding.objects.filter(kind=problem.kind)
    if problem.version is not None:
        findings = findings.filter(index_version=problem.version)
    elif problem.run is not None:
        findings = findings.filter(run=problem.run)
    else:
        findings = findings.filter(document=problem.document)
    if since is not None:
        findings = findings.filter(created_at__gte=since)
    return findings.count()


def _record(problem: Problem, outcome: str, tries: int, message: str = "", run: IngestionRun | None = None) -> Finding:
    """The Finding, counted on /metrics; a document sent back says so while it waits."""
    run = run or problem.run
    reason = message or problem.reason
    finding = Finding.objects.create(
        kind=problem.kind,
        outcome=outcome,
        reason=reason,
        attempt=tries + 1,
        collection_id=problem.collection_id,
        document=problem.document or (run.document if run else None),
        run=run,
        index_version=problem.version,
    )
    metrics.RECONCILER_FINDINGS.labels(problem.kind, outcome).inc()
    if outcome == Finding.Outcome.SENT_BACK and finding.document_id is not None:
        note = _("Re-queued at %(time)s after %(reason)s (try %(try)d of %(tries)d).") % {
            "time": timezone.localtime(finding.created_at).strftime("%Y-%m-%d %H:%M"),
            "reason": problem.reason,
            "try": tries + 1,
            "tries": settings.RECONCILE_TRIES,
        }
        Document.objects.filter(pk=finding.document_id, status__in=WAITING).update(error=note)
    return finding


def _fail_run(run: IngestionRun, message: str) -> bool:
    """End a queued or running run as failed; an ingest run's document fails with it. False
    when the run ended meanwhile."""
    with transaction.atomic():
        if not end_run(run, IngestionRun.Status.FAILED, error=message, only_from=LIVE):
            return False
        if run.kind == IngestionRun.Kind.INGEST and run.document is not None:
            fail_document(run.document, message, run.pk)
    return True

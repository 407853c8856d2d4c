"""An ingestion run from claim to end: one document into its collection's index versions,
page by page, redoing only what changed; its progress, cancelling and failure (what is left
stuck is found and sent back by reconcile.py). No Celery here: tasks.py wraps these functions, and tests call
them directly. Pages are written by pages.py, chunks and versions by index.py.

A page is valid in a version when its IndexedPage row matches its content hash and all its
chunks exist there with the version's dims; anything else is deleted and redone. A document
is whole in a version once every page is valid there (IndexedDocument). Pages' chunks wait
until they fill an embedder batch (index.EMBED_BATCH_CHARS) or have waited for
EMBED_BATCH_SECONDS, then embed in one call, and the batch's pages become searchable at once
(stats.add_pages): a long manual answers about its first chapter while the rest is parsed.
The first page is a batch of its own, so that a new document is searchable within seconds
of its worker taking it.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import Q, Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from common import metrics
from common.cancelled import Cancelled
from common.runs import end_run
from common.storage import local_copy
from ingestion import stats
from ingestion.failing import fail_document
from ingestion.index import (
    EMBED_BATCH_CHARS,
    EMBED_BATCH_SECONDS,
    DraftedPage,
    draft_page,
    ensure_active_version,
    page_valid,
    target_versions,
    version_chunk_settings,
    write_pages,
)
from ingestion.models import IngestionRun
from ingestion.pages import enriched_page, save_page
from ingestion.parsers.base import ParseError, Parser
from ingestion.parsers.formats import parser_for
from ingestion.parsers.guard import guarded
from ingestion.runs import enqueue_run
from ingestion.stages import Profile, current_profile, profiling, stage
from ingestion.versions import complete_build_if_done
from knowledge.events import send_collection_event_on_commit
from knowledge.models import Document, IndexedDocument, IndexVersion, Page
from providers.base import ProviderError, TextEmbedder, check_dims

log = logging.getLogger(__name__)
EVENT_INTERVAL = 0.3  # seconds between progress events for one run


@dataclass(frozen=True)
class IngestResult:
    pages: int
    pages_indexed: int
    pages_kept: int
    chunks_written: int

    def as_counts(self) -> dict[str, int]:
        return {
            "pages": self.pages,
            "pages_indexed": self.pages_indexed,
            "pages_kept": self.pages_kept,
            "chunks_written": self.chunks_written,
        }


def ingest_document(run: IngestionRun, embedder: TextEmbedder, *, part_pages: int = 0) -> IngestResult | None:
    """Run a claimed ingest run to its end and record the outcome on it. `part_pages`: a
    document of at least twice that many pages is split among the workers (`_split`); only
    a worker's task sets it, since the parts are queued for workers (0: read it all here)."""
    document = run.document
    assert document is not None
    try:
        with profiling() as profile:
            try:
                result = _ingest(run, document, embedder, part_pages)
            finally:  # a failed or cancelled run keeps its profile too
                IngestionRun.objects.filter(pk=run.pk).update(stages=profile.as_json())
    except Cancelled:  # the run's cancel_requested was set: it stopped between pages
        stats.withdraw_unfinished(document.pk)
        _finish(run, IngestionRun.Status.CANCELLED, error=_("Cancelled before the end; run it again to finish."))
        return None
    except (ParseError, ProviderError) as exc:
        _fail(run, document, str(exc), cause="model" if isinstance(exc, ProviderError) else "parse")
        if isinstance(exc, ProviderError) and exc.retryable:
            raise  # the task retries with backoff
        _stop_other_parts(run)
        return None
    except (OperationalError, InterfaceError) as exc:  # the database went away (restarted)
        with contextlib.suppress(OperationalError, InterfaceError):  # it may still be away
            message = _("The connection to the database was lost while indexing (%(error)s); it is tried again.")
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            _fail(run, document, message % {"error": first_line}, traceback.format_exc(), cause="database")
        raise  # the task retries with backoff
    except Exception as exc:
        if not IngestionRun.objects.filter(pk=run.pk).exists():  # deleted with its document or collection
            log.info("Ingestion run %s stopped: its document was deleted meanwhile", run.pk)
            return None
        if disk_full(exc):  # not the document's fault, and retrying at once would not help
            _fail(run, document, disk_full_message(), traceback.format_exc(), cause="disk_full")
            return None
        message = _("Unexpected error while indexing: %(error)s") % {"error": exc}
        _fail(run, document, message, traceback.format_exc(), cause="internal")
        raise
    _finish(run, IngestionRun.Status.SUCCEEDED, counts=result.as_counts())
    return result


def _stop_other_parts(run: IngestionRun) -> None:
    """A part of a split document failed for good: the others stop at their next page."""
    if run.last_page is not None:
        active = (IngestionRun.Status.QUEUED, IngestionRun.Status.RUNNING)
        others = IngestionRun.objects.filter(_split_runs(run.part_of_id or run.pk), status__in=active)
        others.exclude(pk=run.pk).update(cancel_requested=True)


def disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def disk_full_message() -> str:
    return _(
        "The server's disk is full, so this document's pages could not be saved. Free some space, then run it again."
    )


def _ingest(run: IngestionRun, document: Document, embedder: TextEmbedder, part_pages: int) -> IngestResult:
    collection = document.collection
    active = ensure_active_version(collection, embedder)
    versions = target_versions(collection)
    for version in versions:
        check_dims(embedder, version.dims, role="embedding", provider=embedder.model_id.split(":")[0])
    complete = set(
        IndexedDocument.objects.filter(
            document=document, sha256=document.sha256, index_version__in=versions
        ).values_list("index_version_id", flat=True)
    )
    # Versions where this content is already complete keep serving it, untouched.
    pending = [version for version in versions if version.pk not in complete]
    if not pending:  # whole in every version already: ready, whatever it was said to be
        Document.objects.filter(pk=document.pk).exclude(status=Document.Status.READY).update(
            status=Document.Status.READY, error=""
        )
        pages = document.pages.count()
        return IngestResult(pages=pages, pages_indexed=0, pages_kept=pages, chunks_written=0)
    reader = parser_for(document.mime)
    parser = guarded(reader, waiting=lambda: _beat(run))
    if run.part_of_id is None:
        # Unsearchable in the pending versions until its pages are valid there again, batch by
        # batch; a run that stopped half-way left some searchable without an IndexedDocument.
        IndexedDocument.objects.filter(document=document, index_version__in=pending).delete()
        for version in pending:
            stats.add_document(version.pk, document.pk, -1)
        if active.pk in {version.pk for version in pending}:
            Document.objects.filter(pk=document.pk).update(status=Document.Status.PROCESSING, error="")
    numbers: list[int] = []
    profile = current_profile()
    indexed = kept = written = 0
    last_event = 0.0
    batch = _Batch(pending)  # drafted pages waiting for the embedder: one call per batch
    # Parsers read a path: in an object store, a temporary copy kept until the last page.
    with _original(document) as original:
        if run.part_of_id is None and run.last_page is None:
            with stage("open"):
                total = parser.count(original)
            if total:
                IngestionRun.objects.filter(pk=run.pk).update(total=total)
                run.total = total
                _split(run, reader, total, part_pages)
        if run.last_page is not None:  # a part, or the first pages of a split document
            parsing = parser.page_range(original, run.first_page or 1, run.last_page)
        else:
            parsing = parser.pages(original)
        started = time.perf_counter()
        pages_read = metrics.INGESTED_PAGES.labels(format_name(reader))
        for parsed in parsing:
            pages_read.inc()
            with stage("database"):
                page = save_page(document, parsed)
                stale = [version for version in pending if not page_valid(page, version)]
            numbers.append(parsed.number)
            kept += len(pending) - len(stale)
            drafted = []
            if stale:
                enriched = enriched_page(page, parsed)
                drafted = [draft_page(page, enriched, version, version_chunk_settings(version)) for version in stale]
                indexed += len(drafted)
            batch.add(page, time.perf_counter() - started, drafted)
            if batch.chars >= EMBED_BATCH_CHARS or batch.waited() >= EMBED_BATCH_SECONDS or len(numbers) == 1:
                written += batch.write(embedder, profile)
            if _progress(run, len(numbers), last_event):
                last_event = time.monotonic()
            started = time.perf_counter()
        written += batch.write(embedder, profile)
    result = IngestResult(pages=len(numbers), pages_indexed=indexed, pages_kept=kept, chunks_written=written)
    if run.last_page is None:
        _finish_document(document, pending, numbers)
    elif not _last_part_done(run, result, pending):
        return result  # other parts are still being read: the last one to end finishes the document
    for version in pending:
        if version.status == IndexVersion.Status.BUILDING:
            complete_build_if_done(version)
    return result


def format_name(parser: Parser) -> str:
    """The format a parser reads, as /metrics labels pages with it: `pdf`, `docx`, `text`…"""
    return type(parser).__name__.removesuffix("Parser").lower()


def _split(run: IngestionRun, parser: Parser, total: int, size: int) -> None:
    """Split a long document among the ingest workers, `size` pages a part: the run keeps the
    first pages, and a part run for each later range is queued for any worker. A range
    shorter than half a part joins the one before it. Nothing when the format cannot read a
    range alone or the document has fewer than two parts' pages."""
    if not size or not parser.splits or total < 2 * size:
        return
    starts = list(range(1, total + 1, size))
    if total - starts[-1] + 1 < size // 2:
        starts.pop()
    ranges = [(first, (starts[i + 1] - 1) if i + 1 < len(starts) else total) for i, first in enumerate(starts)]
    with transaction.atomic():
        run.first_page, run.last_page = ranges[0]
        run.save(update_fields=["first_page", "last_page"])
        for first, last in ranges[1:]:
            part = IngestionRun.objects.create(
                collection_id=run.collection_id,
                document_id=run.document_id,
                kind=IngestionRun.Kind.INGEST,
                part_of=run,
                first_page=first,
                last_page=last,
                total=last - first + 1,
                requested_by_id=run.requested_by_id,
            )
            enqueue_run(part)


def _last_part_done(run: IngestionRun, result: IngestResult, versions: list[IndexVersion]) -> bool:
    """Record this part of a split document as done; True when it was the last one, and the
    document is then finished (ready, whole in its versions). The first run's row is locked
    while the parts are counted, so that two parts ending at once cannot both miss the end."""
    root_id = run.part_of_id or run.pk
    with transaction.atomic():
        root = IngestionRun.objects.select_for_update().get(pk=root_id)
        _finish(run, IngestionRun.Status.SUCCEEDED, counts=result.as_counts())
        if IngestionRun.objects.filter(_split_runs(root_id)).exclude(status=IngestionRun.Status.SUCCEEDED).exists():
            return False
        document = run.document
        assert document is not None
        assert root.total is not None
        _finish_document(document, versions, list(range(1, root.total + 1)))
    return True


def another_run_reading(run: IngestionRun) -> bool:
    """Whether another run (not a part of the same split document) is reading `run`'s
    document now: then `run` waits, so that one document is written by one run at a time."""
    if run.document_id is None:
        return False
    return (
        IngestionRun.objects.filter(document_id=run.document_id, status=IngestionRun.Status.RUNNING)
        .exclude(_split_runs(run.part_of_id or run.pk))
        .exists()
    )


def _split_runs(root_id: int) -> Q:
    """The first run of a split document and its parts."""
    return Q(pk=root_id) | Q(part_of_id=root_id)


@dataclass
class _Batch:
    """Pages waiting for the embedder (index.EMBED_BATCH_CHARS) with their drafted chunks and
    each page's own seconds so far: in the profile a page takes its share of the batch's
    embedding, by its characters, instead of the whole batch falling on the page that filled
    it. Once written, every page of the batch (drafted or kept) is valid in the versions, and
    searchable there."""

    versions: list[IndexVersion]
    drafted: list[DraftedPage] = field(default_factory=list)
    pages: list[tuple[Page, float, int]] = field(default_factory=list)  # (page, seconds, characters)
    since: float = 0.0  # when its first page was added (time.monotonic)

    @property
    def chars(self) -> int:
        return sum(chars for _number, _seconds, chars in self.pages)

    def waited(self) -> float:
        """Seconds since its first page was done."""
        return time.monotonic() - self.since if self.pages else 0.0

    def add(self, page: Page, seconds: float, drafted: list[DraftedPage]) -> None:
        if not self.pages:
            self.since = time.monotonic()
        self.drafted += drafted
        self.pages.append((page, seconds, sum(item.chars for item in drafted)))

    def write(self, embedder: TextEmbedder, profile: Profile | None) -> int:
        if not self.pages:
            return 0
        started = time.perf_counter()
        written = write_pages(self.drafted, embedder) if self.drafted else 0
        with stage("database"):
            for version in self.versions:
                stats.add_pages(version.pk, self.pages[0][0].document_id, [page.pk for page, _s, _c in self.pages])
        spent, chars = time.perf_counter() - started, self.chars
        if profile is not None:
            for page, seconds, own in self.pages:
                profile.page_done(page.number, seconds + spent * (own / chars if chars else 1 / len(self.pages)))
        self.drafted, self.pages = [], []
        return written


@contextlib.contextmanager
def _original(document: Document) -> Iterator[Path]:
    """The stored original as a local path; a ParseError (the run fails with a readable
    message) when the storage no longer has it."""
    with contextlib.ExitStack() as stack:
        try:
            path = stack.enter_context(local_copy(document.file))
        except FileNotFoundError:  # only here: a parser's own FileNotFoundError is not this
            raise ParseError(_("The stored file of this document is missing; upload it again.")) from None
        yield path


def _finish_document(document: Document, versions: list[IndexVersion], numbers: list[int]) -> None:
    with transaction.atomic():
        Page.objects.filter(document=document).exclude(number__in=numbers).delete()  # the file got shorter
        for version in versions:
            IndexedDocument.objects.update_or_create(
                index_version=version, document=document, defaults={"sha256": document.sha256}
            )
        Document.objects.filter(pk=document.pk).update(
            status=Document.Status.READY, error="", page_count=len(numbers), updated_at=timezone.now()
        )
        send_collection_event_on_commit(
            document.collection_id,
            {
                "type": "document.ready",
                "document": document.pk,
                "pages": len(numbers),
            },
        )


def _beat(run: IngestionRun, pages: int | None = None) -> None:
    """Record a heartbeat (and the pages done, when given), and stop if the run was cancelled:
    one query. Called for each page, and every few seconds while one page takes long."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE ingestion_ingestionrun SET progress = COALESCE(%s, progress), heartbeat_at = %s "
            "WHERE id = %s RETURNING cancel_requested",
            [pages, timezone.now(), run.pk],
        )
        row = cursor.fetchone()
    if row and row[0]:
        raise Cancelled


def _progress(run: IngestionRun, pages: int, last_event: float) -> bool:
    """Record progress and a heartbeat, stop if cancelled, and tell watchers at most a few
    times a second. True when an event was sent."""
    _beat(run, pages)
    if run.document_id is None or time.monotonic() - last_event < EVENT_INTERVAL:
        return False
    shown = run
    if run.last_page is not None:  # a split document: its pages done by every worker
        shown = run.part_of or run
        pages = IngestionRun.objects.filter(_split_runs(shown.pk)).aggregate(done=Sum("progress"))["done"] or pages
    event = {
        "type": "document.progress",
        "document": run.document_id,
        "run": shown.pk,
        "pages_done": pages,
        "pages_total": shown.total,  # None when the format cannot tell before parsing
        **pace(shown, pages),
    }
    send_collection_event_on_commit(run.collection_id, event)
    return True


def pace(run: IngestionRun, pages: int) -> dict[str, float | int | None]:
    """Pages per second since the run started, and the seconds its remaining pages will take
    at that pace (None while the total is unknown or nothing is done yet)."""
    elapsed = (timezone.now() - run.started_at).total_seconds() if run.started_at else 0.0
    rate = pages / elapsed if pages and elapsed > 0 else 0.0
    left = round((run.total - pages) / rate) if rate and run.total and run.total >= pages else None
    return {"pages_per_second": round(rate, 2), "seconds_left": left}


def _fail(run: IngestionRun, document: Document, message: str, trace: str = "", *, cause: str) -> None:
    """The run failed: `cause` (parse, model, database, disk_full, internal) is counted for
    /metrics, the message shown."""
    metrics.ERRORS.labels("ingestion", cause).inc()
    fail_document(document, message, run.pk)
    _finish(run, IngestionRun.Status.FAILED, error=message, trace=trace)


def _finish(
    run: IngestionRun, status: str, *, error: str = "", trace: str = "", counts: dict[str, int] | None = None
) -> None:
    end_run(run, status, error=error, traceback=trace, counts=counts or {})
    with contextlib.suppress(IngestionRun.DoesNotExist):  # deleted with its document meanwhile
        run.refresh_from_db()

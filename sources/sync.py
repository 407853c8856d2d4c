"""One sync of a source: list it, fetch only what changed, and bring the collection in line.

- An entry whose change signal (size and mtime, ETag, Git blob id) is the one recorded when
  it was last fetched is not fetched again: an unchanged re-scan costs one listing and one
  query.
- New and changed files go through ingestion's own `do_add_document`: stored, sniffed,
  checked, and their changed pages alone re-embedded. A changed file that its parser
  refuses keeps the document's last good version, as an upload does.
- A new path whose content is that of a file gone from the source is a rename: the document
  keeps its pages and chunks and takes the new path (Git knows the content by its blob id,
  so nothing is fetched; the others are fetched and hashed).
- Files gone from the source are removed from the collection last, and only when the run
  got through: a source that fails mid-run (a bucket that vanished, a host gone) removes
  nothing.

Each run records counts and the reason for every file it skipped (`SyncRun.failures`)."""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

from django.core.exceptions import ValidationError
from django.core.files.base import File
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.log import record
from audit.models import Action
from common.runs import claim, end_run
from ingestion import pipeline
from ingestion.actions import do_add_document
from knowledge.actions import check_upload_size, clean_document_path, do_delete_document, file_sha256
from knowledge.events import send_collection_event
from knowledge.models import Document
from portal.redact import scrub
from providers import registry
from sources.crypto import CredentialsError
from sources.models import Source, SourceFile, SyncRun
from sources.remotes import Entry, FileError, Remote, RemoteError, open_remote

log = logging.getLogger(__name__)

PART_MAX = 200  # a document path's parts stop there (knowledge.actions.clean_document_path)
PROGRESS_EVERY = 1.0  # seconds between progress events


def selected(path: str, include: Iterable[str], exclude: Iterable[str]) -> bool:
    """Whether the path is synced: it matches an include glob (or there are none) and no
    exclude glob. `*` matches any characters, `/` too; a pattern ending in `/` is a folder."""
    include, exclude = list(include), list(exclude)
    return (not include or any(_matches(path, p) for p in include)) and not any(_matches(path, p) for p in exclude)


def _matches(path: str, pattern: str) -> bool:
    if pattern.endswith("/"):
        return path.startswith(pattern) or f"/{pattern}" in f"/{path}"
    return fnmatchcase(path, pattern) or fnmatchcase(PurePosixPath(path).name, pattern)


def globs(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def check_path(path: str) -> None:
    """Refuse a path the collection cannot hold as it is, instead of storing it changed."""
    parts = path.split("/")
    if any(part == ".." for part in parts) or path.startswith("/"):
        raise FileError(_("the path leaves the source's folder (“..” or a leading “/”)"))
    if any(len(part) > PART_MAX for part in parts):
        raise FileError(_("a name in the path is longer than %(limit)s characters") % {"limit": PART_MAX})
    if len(path) > 1000:
        raise FileError(_("the path is longer than 1,000 characters"))


@dataclass
class Plan:
    """The listing compared with what the source brought in before."""

    unchanged: list[Entry] = field(default_factory=list)
    changed: list[tuple[Entry, SourceFile]] = field(default_factory=list)
    new: list[Entry] = field(default_factory=list)
    gone: dict[str, SourceFile] = field(default_factory=dict)  # by path in the source
    problems: list[Entry] = field(default_factory=list)


def plan(entries: Iterable[Entry], known: dict[str, SourceFile]) -> Plan:
    found = Plan()
    listed: set[str] = set()
    for entry in entries:
        listed.add(entry.path)
        if entry.problem:
            found.problems.append(entry)
            continue
        before = known.get(entry.path)
        if before is None:
            found.new.append(entry)
        elif before.signal == entry.signal and before.document.status != Document.Status.FAILED:
            found.unchanged.append(entry)
        else:
            found.changed.append((entry, before))
    found.gone = {path: file for path, file in known.items() if path not in listed}
    return found


class Syncer:
    """Applies a plan for one run (`inline`: ingest here instead of queueing; `keep_missing`:
    documents of files gone from the source stay, as `manage.py ingest --keep-missing` asks)."""

    def __init__(self, run: SyncRun, remote: Remote, *, inline: bool = False, keep_missing: bool = False) -> None:
        self.run, self.source, self.remote, self.inline = run, run.source, remote, inline
        self.keep_missing = keep_missing
        self.collection = self.source.collection
        self.counts = {k: 0 for k in ("listed", "added", "changed", "unchanged", "renamed", "deleted", "failed")}
        self.failures: list[dict[str, str]] = []
        self.secrets = self.source.credentials().secrets() if self.source.has_credentials else ()
        self._last_event = 0.0
        self.workdir = Path(tempfile.mkdtemp(prefix="portal-sync-"))

    def sync(self) -> None:
        include, exclude = globs(self.source.include), globs(self.source.exclude)
        known = {f.path: f for f in SourceFile.objects.filter(source=self.source).select_related("document")}
        entries = [e for e in self.remote.entries() if selected(e.path, include, exclude)]
        found = plan(entries, known)
        self.counts["listed"] = len(entries)
        self.counts["unchanged"] = len(found.unchanged)
        work = [*found.changed, *((entry, None) for entry in found.new)]
        self.run.total = len(work) + (0 if self.keep_missing else len(found.gone))
        self._progress(force=True)
        for entry in found.problems:
            self._failed(entry.path, entry.problem)
        # Renames that need no fetch: the remote names the content (Git's blob ids).
        by_content = {f.content_id: f for f in found.gone.values() if f.content_id}
        for entry, before in work:
            try:
                if before is None and entry.content_id and entry.content_id in by_content:
                    self._rename(by_content.pop(entry.content_id), entry, found.gone)
                else:
                    self._bring(entry, before, found.gone)
            except FileError as exc:
                self._failed(entry.path, str(exc))
            except ValidationError as exc:
                # Ingestion names the file first ("a.md: The file is empty."), as an upload
                # needs; the run's list names it already.
                stored = self.source.document_path(entry.path)
                why = " ".join(m.removeprefix(f"{stored}: ") for m in exc.messages)
                self._failed(entry.path, why)
            self.run.progress += 1
            self._progress()
        if self.keep_missing:
            return
        for file in found.gone.values():
            do_delete_document(file.document)
            self.counts["deleted"] += 1
            self.run.progress += 1
            self._progress()

    def _bring(self, entry: Entry, before: SourceFile | None, gone: dict[str, SourceFile]) -> None:
        """Fetch a new or changed file and store it (or move a gone document here)."""
        check_path(entry.path)
        rel_path = clean_document_path(self.source.document_path(entry.path))
        if entry.size is not None:
            check_upload_size(rel_path, entry.size)  # refused before anything is fetched
        if before is None:
            self._check_free(rel_path)
        local = self._fetch(entry)
        with local.open("rb") as handle:
            content = File(handle, name=PurePosixPath(rel_path).name)
            sha256 = file_sha256(content)
            if before is None:
                moved = next((f for f in gone.values() if f.document.sha256 == sha256), None)
                if moved is not None:
                    self._rename(moved, entry, gone)
                    return
            elif before.document.sha256 == sha256 and before.document.status != Document.Status.FAILED:
                # Touched, not changed (a new mtime, an ETag of a re-upload): nothing to redo.
                SourceFile.objects.filter(pk=before.pk).update(signal=entry.signal)
                self.counts["unchanged"] += 1
                return
            document, ingest = do_add_document(self.collection, rel_path, content, enqueue=not self.inline)
        if before is None:
            SourceFile.objects.create(
                source=self.source, document=document, path=entry.path, signal=entry.signal, content_id=entry.content_id
            )
            self.counts["added"] += 1
        else:
            SourceFile.objects.filter(pk=before.pk).update(signal=entry.signal, content_id=entry.content_id)
            self.counts["changed"] += 1
        if ingest is not None and self.inline and claim(ingest):
            pipeline.ingest_document(ingest, registry.text_embedder())

    def _fetch(self, entry: Entry) -> Path:
        local = getattr(self.remote, "open_local", None)
        if local is not None:
            return Path(local(entry))
        destination = self.workdir / "file"
        self.remote.fetch(entry, destination)
        return destination

    def _check_free(self, rel_path: str) -> None:
        """A new file may not take over a document that another source or an upload owns."""
        taken = Document.objects.filter(collection=self.collection, rel_path=rel_path).select_related("source_file")
        document = taken.first()
        if document is None:
            return
        owner = getattr(document, "source_file", None)
        if owner is None or owner.source_id != self.source.pk:
            raise FileError(
                _("the collection already has a document at “%(path)s” that is not from this source")
                % {"path": rel_path}
            )

    def _rename(self, file: SourceFile, entry: Entry, gone: dict[str, SourceFile]) -> None:
        """The document of a file gone from the source takes the new path: same content."""
        check_path(entry.path)
        rel_path = clean_document_path(self.source.document_path(entry.path))
        self._check_free(rel_path)
        gone.pop(file.path, None)
        document = file.document
        before = document.rel_path
        with transaction.atomic():
            document.rel_path, document.name = rel_path, PurePosixPath(rel_path).name
            document.save(update_fields=["rel_path", "name", "updated_at"])
            file.path, file.signal, file.content_id = entry.path, entry.signal, entry.content_id
            file.save(update_fields=["path", "signal", "content_id"])
            scope = self.collection.audit_scope()
            record(Action.DOCUMENT_MOVE, document, label=rel_path, changes={"rel_path": (before, rel_path)}, **scope)
        self.counts["renamed"] += 1

    def _failed(self, path: str, why: str) -> None:
        self.counts["failed"] += 1
        self.failures.append({"path": path, "error": scrub(why, *self.secrets)})

    def _progress(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_event < PROGRESS_EVERY:
            return
        self._last_event = now
        self.run.counts, self.run.failures, self.run.heartbeat_at = self.counts, self.failures, timezone.now()
        self.run.save(update_fields=["counts", "failures", "progress", "total", "heartbeat_at"])
        send_collection_event(self.collection.pk, self.run.as_event())


def execute(run: SyncRun, *, inline: bool = False, keep_missing: bool = False) -> SyncRun:
    """The claimed run, from listing to its last deletion; it ends succeeded or failed."""
    run.refresh_from_db()
    source = run.source
    syncer: Syncer | None = None
    error = ""
    try:
        # No host check here: each remote connects through common.outbound's Connector, which
        # checks what the name resolves to and connects only to that checked address.
        remote = open_remote(source.location(), source.credentials())
        syncer = Syncer(run, remote, inline=inline, keep_missing=keep_missing)
        try:
            syncer.sync()
        finally:
            remote.close()
    except (RemoteError, CredentialsError) as exc:
        error = str(exc)
    except Exception as exc:  # the run must end with a reason, whatever broke
        log.exception("sync of source %s failed", source.pk)
        error = _("The sync stopped on an unexpected error: %(error)s") % {"error": exc}
    finally:
        if syncer is not None:
            shutil.rmtree(syncer.workdir, ignore_errors=True)
    _finish(run, syncer, scrub(error, *_safe_secrets(source)) if error else "")
    return run


def _safe_secrets(source: Source) -> tuple[str, ...]:
    try:
        return source.credentials().secrets()
    except CredentialsError:
        return ()


def _finish(run: SyncRun, syncer: Syncer | None, error: str) -> None:
    if syncer is not None:
        run.counts, run.failures = syncer.counts, syncer.failures
    status = SyncRun.Status.FAILED if error else SyncRun.Status.SUCCEEDED
    fields = {"counts": run.counts, "failures": run.failures, "progress": run.progress, "total": run.total}
    end_run(run, status, error=error, heartbeat_at=timezone.now(), **fields)
    Source.objects.filter(pk=run.source_id).update(last_sync_at=run.finished_at)
    send_collection_event(run.source.collection_id, run.as_event())

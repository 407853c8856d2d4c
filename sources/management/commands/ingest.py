"""`manage.py ingest <folder> --collection <id>`: sync a server folder into a collection, as
a folder source (made for it the first time, named after the folder, synced only by hand;
the collection's sources tab shows it and its runs).

The folder must be under PORTAL_SOURCE_ROOTS, as every folder source's. New and changed
files are ingested, unchanged ones skipped (their size and modification time, then their
content), and documents whose file is gone from the folder removed unless --keep-missing.
Files are indexed in the Celery workers, or here with --inline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from knowledge.models import Collection
from sources.actions import do_folder_source, do_start_sync, do_sync_here
from sources.models import SyncRun


class Command(BaseCommand):
    help = "Sync a server folder into a collection: ingest new and changed files, remove documents of deleted files."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", type=Path)
        parser.add_argument("--collection", type=int, required=True, help="The collection's id.")
        parser.add_argument("--inline", action="store_true", help="Index here instead of in the Celery workers.")
        parser.add_argument(
            "--keep-missing",
            action="store_true",
            help="With --inline: do not remove documents whose file is no longer in the folder.",
        )

    def handle(
        self, *args: Any, folder: Path, collection: int, inline: bool, keep_missing: bool, **options: Any
    ) -> None:
        if keep_missing and not inline:
            raise CommandError("--keep-missing works with --inline: a queued sync removes what is gone.")
        if not folder.is_dir():
            raise CommandError(f"{folder} is not a folder.")
        target = Collection.objects.filter(pk=collection).first()
        if target is None:
            raise CommandError(f"No collection has the id {collection}.")
        try:
            source = do_folder_source(target, str(folder.absolute()))
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        if not inline:
            run = do_start_sync(source)
            self.stdout.write(f"Sync run {run.pk} of source {source.pk} ({source.name}) queued.")
            return
        report(self, do_sync_here(source, keep_missing=keep_missing))


def report(command: BaseCommand, run: SyncRun) -> None:
    """A run's skipped files on stderr and its counts on stdout; CommandError when it failed."""
    for failure in run.failures:
        command.stderr.write(f"skipped {failure['path']}: {failure['error']}")
    if run.status == SyncRun.Status.FAILED:
        raise CommandError(run.error)
    command.stdout.write(", ".join(f"{value} {key}" for key, value in run.counts.items()))

"""`manage.py ingest <dir> --collection <id>`: sync a server folder into a collection.

New and changed files are ingested, unchanged ones skipped, and documents whose file is gone
from the folder are removed. Runs go to the Celery queue, or run here with --inline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingestion import actions
from ingestion.models import IngestionRun
from ingestion.pipeline import IngestResult
from knowledge.models import Collection


class Command(BaseCommand):
    help = "Sync a folder into a collection: ingest new and changed files, remove documents of deleted files."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", type=Path)
        parser.add_argument("--collection", type=int, required=True, help="The collection's id.")
        parser.add_argument("--inline", action="store_true", help="Index here instead of in the Celery workers.")
        parser.add_argument(
            "--keep-missing", action="store_true", help="Do not remove documents whose file is no longer in the folder."
        )

    def handle(
        self, *args: Any, folder: Path, collection: int, inline: bool, keep_missing: bool, **options: Any
    ) -> None:
        if not folder.is_dir():
            raise CommandError(f"{folder} is not a folder.")
        target = Collection.objects.filter(pk=collection).first()
        if target is None:
            raise CommandError(f"No collection has the id {collection}.")

        def ingested(rel_path: str, run: IngestionRun, result: IngestResult | None) -> None:
            self.stdout.write(f"{rel_path}: {run.status} {run.error or (result.as_counts() if result else '')}")

        sync = actions.do_sync_folder(target, folder, inline=inline, keep_missing=keep_missing, on_ingested=ingested)
        for rel_path, why in sync.skipped:
            self.stderr.write(f"skipped {rel_path}: {why}")
        self.stdout.write(", ".join(f"{value} {key}" for key, value in sync.counts.items()))

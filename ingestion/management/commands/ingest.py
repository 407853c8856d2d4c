"""`manage.py ingest <dir> --collection <id>`: sync a server folder into a collection.

New and changed files are ingested, unchanged ones skipped, and documents whose file is gone
from the folder are removed. Runs go to the Celery queue, or run here with --inline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.files import File
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingestion import actions, pipeline
from knowledge.actions import clean_document_path, do_delete_document, file_sha256
from knowledge.models import Collection, Document
from providers import registry


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
        # One query for what the collection already has: unchanged files cost a hash, no query.
        known = dict(
            Document.objects.filter(collection=target)
            .exclude(status=Document.Status.FAILED)
            .values_list("rel_path", "sha256")
        )
        seen: set[str] = set()
        counts = {"queued": 0, "unchanged": 0, "failed": 0, "removed": 0}
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
            rel_path = path.relative_to(folder).as_posix()
            try:
                with path.open("rb") as handle:  # hashed and copied in chunks, never read whole
                    content = File(handle, name=path.name)
                    if known.get(rel_path) == file_sha256(content):
                        seen.add(rel_path)
                        counts["unchanged"] += 1
                        continue
                    document, run = actions.do_add_document(target, rel_path, content, enqueue=not inline)
            except ValidationError as exc:
                counts["failed"] += 1
                self.stderr.write(f"skipped {rel_path}: {' '.join(exc.messages)}")
                # The file is still in the folder: what was stored for it stays.
                seen.add(_stored_path(rel_path))
                continue
            seen.add(document.rel_path)
            if run is None:
                counts["unchanged"] += 1
                continue
            counts["queued"] += 1
            if inline and pipeline.claim(run):
                result = pipeline.ingest_document(run, registry.text_embedder())
                run.refresh_from_db()
                self.stdout.write(f"{rel_path}: {run.status} {run.error or (result.as_counts() if result else '')}")
        if not keep_missing:
            for document in Document.objects.filter(collection=target).exclude(rel_path__in=seen):
                do_delete_document(document)
                counts["removed"] += 1
        self.stdout.write(", ".join(f"{value} {key}" for key, value in counts.items()))


def _stored_path(rel_path: str) -> str:
    """The path a document of this file is stored under, or "" for a name that has none."""
    try:
        return clean_document_path(rel_path)
    except ValidationError:
        return ""

"""`manage.py sources`: list the sources, sync one now (`--sync <id>`, in this process with
`--inline`), or encrypt every stored credential again with the first of PORTAL_SOURCE_KEYS
(`--rotate-keys`, after putting a new key first)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from sources import crypto
from sources.actions import do_start_sync, do_sync_here
from sources.management.commands.ingest import report
from sources.models import Source


class Command(BaseCommand):
    help = "List sources, sync one now, or re-encrypt stored credentials with the first key."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--sync", type=int, metavar="ID", help="Sync this source now.")
        parser.add_argument("--inline", action="store_true", help="With --sync: list, fetch and index here.")
        parser.add_argument("--rotate-keys", action="store_true", help="Encrypt credentials with the first key.")

    def handle(self, *args: Any, sync: int | None, inline: bool, rotate_keys: bool, **options: Any) -> None:
        if rotate_keys:
            self._rotate()
        elif sync is not None:
            self._sync(sync, inline)
        else:
            for source in Source.objects.select_related("collection").order_by("pk"):
                last = source.runs.first()
                state = f"{last.status} {last.counts}" if last else "never synced"
                self.stdout.write(f"{source.pk}\t{source.collection}\t{source.name}\t{source.kind}\t{state}")

    def _sync(self, source_id: int, inline: bool) -> None:
        source = Source.objects.select_related("collection").filter(pk=source_id).first()
        if source is None:
            raise CommandError(f"No source has the id {source_id}.")
        if not inline:
            run = do_start_sync(source)
            self.stdout.write(f"Sync run {run.pk} queued.")
            return
        report(self, do_sync_here(source))

    def _rotate(self) -> None:
        rotated = 0
        with transaction.atomic():
            for source in Source.objects.select_for_update().exclude(credentials_token=""):
                try:
                    token = crypto.rotate(source.credentials_token)
                except crypto.CredentialsError as exc:
                    raise CommandError(f"Source {source.pk} ({source.name}): {exc}") from None
                Source.objects.filter(pk=source.pk).update(credentials_token=token)
                rotated += 1
        self.stdout.write(f"{rotated} sources' credentials encrypted with the first key.")

"""`manage.py restore ARCHIVE`: an archive of `manage.py backup` into this (empty) instance,
checked before and verified after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from operations.actions import do_restore
from operations.archive import ArchiveError
from operations.backup import RestoreRefusedError
from operations.management.commands._passphrase import read_passphrase
from operations.postgres import PostgresError


class Command(BaseCommand):
    help = (
        "Restore a backup archive into this instance: every checksum is checked first, then the files and the "
        "database (one transaction), this portal's migrations, and a check against the manifest. An instance "
        "that holds collections, documents or conversations is refused unless --force (it is backed up first)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("archive", help="The .tar file `manage.py backup` wrote.")
        parser.add_argument("--force", action="store_true", help="Replace a non-empty instance (after backing it up).")
        parser.add_argument(
            "--passphrase-file",
            help="A file holding the secrets' passphrase (else PORTAL_BACKUP_PASSPHRASE).",
        )
        parser.add_argument("--safety-dir", help="Where --force writes the backup of this instance.")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["archive"])
        if not path.is_file():
            raise CommandError(f"{path} is not a file.")
        passphrase = read_passphrase(options["passphrase_file"], confirm=False, required=False)
        try:
            restored = do_restore(
                path.resolve(),
                force=options["force"],
                passphrase=passphrase,
                safety_dir=Path(options["safety_dir"]) if options["safety_dir"] else None,
                say=self.stdout.write,
            )
        except (ArchiveError, RestoreRefusedError, PostgresError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        for note in restored.notes:
            self.stdout.write(self.style.WARNING(note))
        self.stdout.write(self.style.SUCCESS(f"Restored {path.name}."))

"""`manage.py restore ARCHIVE`: an archive of `manage.py backup` into this (empty) instance,
checked before and verified after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from operations.actions import do_restore
from operations.archive import ArchiveError
from operations.backup import RestoreRefusedError
from operations.checking import check_backup
from operations.management.commands._passphrase import read_passphrase
from operations.postgres import PostgresError


class Command(BaseCommand):
    help = (
        "Restore a backup archive into this instance: its signature, sizes, checksums and the dump's contents are "
        "checked first, then the files and the database (one transaction, as a role that is not a superuser), this "
        "portal's migrations, and a check against the manifest. An instance that holds collections, documents or "
        "conversations is refused unless --force (it is backed up first)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("archive", help="The .tar file `manage.py backup` wrote.")
        parser.add_argument("--force", action="store_true", help="Replace a non-empty instance (after backing it up).")
        parser.add_argument(
            "--passphrase-file",
            help="A file holding the secrets' passphrase (else PORTAL_BACKUP_PASSPHRASE).",
        )
        parser.add_argument("--safety-dir", help="Where --force writes the backup of this instance.")
        parser.add_argument(
            "--allow-unsigned",
            action="store_true",
            help="Restore an archive that is not signed although PORTAL_BACKUP_SIGNING_KEY is set.",
        )
        parser.add_argument(
            "--check",
            action="store_true",
            help="Only check the archive (signature, sizes, checksums, the dump's contents); change nothing.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["archive"])
        if not path.is_file():
            raise CommandError(f"{path} is not a file.")
        try:
            if options["check"]:
                checked = check_backup(path.resolve(), allow_unsigned=options["allow_unsigned"], say=self.stdout.write)
                self.stdout.write(
                    self.style.SUCCESS(f"{path.name} can be restored here ({checked.signature.describe()}).")
                )
                return
            passphrase = read_passphrase(options["passphrase_file"], confirm=False, required=False)
            restored = do_restore(
                path.resolve(),
                force=options["force"],
                passphrase=passphrase,
                safety_dir=Path(options["safety_dir"]) if options["safety_dir"] else None,
                allow_unsigned=options["allow_unsigned"],
                say=self.stdout.write,
            )
        except (ArchiveError, RestoreRefusedError, PostgresError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        for note in restored.notes:
            self.stdout.write(self.style.WARNING(note))
        self.stdout.write(self.style.SUCCESS(f"Restored {path.name}."))

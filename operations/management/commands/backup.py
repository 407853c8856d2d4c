"""`manage.py backup [--out DIR] [--with-secrets]`: one verified archive of the portal
(database, stored files and, on request, its secrets) while it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from operations.actions import do_backup
from operations.archive import ArchiveError
from operations.management.commands._passphrase import read_passphrase
from operations.postgres import PostgresError


class Command(BaseCommand):
    help = (
        "Write one archive of the portal: a consistent database dump, every stored file its rows name, a "
        "manifest with SHA-256 checksums and, with --with-secrets, the secret key and source keys encrypted "
        "with a passphrase."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--out", help="The folder to write the archive into (default: PORTAL_BACKUP_DIR, else var/backups)."
        )
        parser.add_argument(
            "--with-secrets",
            action="store_true",
            help="Also keep SECRET_KEY and PORTAL_SOURCE_KEYS, encrypted with a passphrase (required).",
        )
        parser.add_argument(
            "--passphrase-file",
            help="A file whose content is the passphrase (else PORTAL_BACKUP_PASSPHRASE, or typed).",
        )
        parser.add_argument(
            "--keep", type=int, default=0, help="Afterwards keep only the newest N archives in the folder (0: all)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        out = Path(options["out"] or settings.BACKUP_DIR or Path(settings.VAR_DIR) / "backups")
        passphrase = None
        if options["with_secrets"]:
            passphrase = read_passphrase(options["passphrase_file"], confirm=True, required=True)
        if options["keep"] < 0:
            raise CommandError("--keep takes 0 (keep all) or a positive number.")
        try:
            made = do_backup(out.resolve(), passphrase=passphrase, keep=options["keep"], say=self.stdout.write)
        except (ArchiveError, PostgresError, OSError) as exc:
            raise CommandError(f"No backup was written: {exc}") from exc
        self.stdout.write(self.style.SUCCESS(str(made.path)))

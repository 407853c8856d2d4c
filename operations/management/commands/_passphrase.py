"""The passphrase that encrypts a backup's secrets: from a file, PORTAL_BACKUP_PASSPHRASE,
or typed at a terminal; never a command-line argument (the process list shows those)."""

from __future__ import annotations

import getpass
import os
import sys
from pathlib import Path

from django.core.management.base import CommandError

MIN_LENGTH = 10


def read_passphrase(path: str | None, *, confirm: bool, required: bool) -> str | None:
    if path:
        try:
            value = Path(path).read_text().strip("\n")
        except OSError as exc:
            raise CommandError(f"The passphrase file cannot be read: {exc}") from exc
    elif os.environ.get("PORTAL_BACKUP_PASSPHRASE"):
        value = os.environ["PORTAL_BACKUP_PASSPHRASE"]
    elif required and sys.stdin.isatty():
        value = getpass.getpass("Passphrase for the secrets: ")
        if confirm and getpass.getpass("The same passphrase again: ") != value:
            raise CommandError("The two passphrases differ; nothing was written.")
    elif required:
        raise CommandError(
            "The secrets are encrypted with a passphrase: give --passphrase-file FILE or set "
            "PORTAL_BACKUP_PASSPHRASE (or run the command at a terminal to type it)."
        )
    else:
        return None
    if confirm and len(value) < MIN_LENGTH:
        raise CommandError(f"The passphrase must have at least {MIN_LENGTH} characters.")
    return value

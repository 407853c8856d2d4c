"""`manage.py memory --import-sqlite-history [PATH]`: move mem0's old SQLite history
(MEM0_DIR/history.db, or PATH) into the portal's PostgreSQL tables memory_history and
memory_messages. Every process also does this on its first use of memory when it finds the
file; the command is for doing it at a chosen moment (an upgrade's step) and for a file
copied from another machine. Idempotent: the rows keep mem0's ids, a second run adds none;
the file is renamed history.db.imported after it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.translation import gettext as _

from assistant.memory.setup import import_sqlite_history, sqlite_history_path


class Command(BaseCommand):
    help = "Memory maintenance: --import-sqlite-history moves mem0's old SQLite history into PostgreSQL."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--import-sqlite-history",
            nargs="?",
            const="",
            metavar="PATH",
            help="Import mem0's SQLite history (default: MEM0_DIR/history.db) into PostgreSQL, once.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        given = options["import_sqlite_history"]
        if given is None:
            raise CommandError(_("Say what to do: --import-sqlite-history [PATH]."))
        path = Path(given) if given else sqlite_history_path()
        try:
            imported = import_sqlite_history(path)
        except Exception as exc:  # sqlite3 or psycopg: a readable line, not a traceback
            raise CommandError(_("Could not import %(path)s: %(error)s") % {"path": path, "error": exc}) from exc
        if imported is None:
            self.stdout.write(_("No SQLite history at %(path)s: nothing to import.") % {"path": path})
            return
        self.stdout.write(
            self.style.SUCCESS(
                _("Imported %(history)d changes and %(messages)d messages from %(path)s; the file is now %(renamed)s.")
                % {
                    "history": imported.history,
                    "messages": imported.messages,
                    "path": path,
                    "renamed": imported.renamed_to or _("gone (imported by another process)"),
                }
            )
        )

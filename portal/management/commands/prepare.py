"""`manage.py prepare`: what a portal needs before its processes start, in one process."""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = (
        "Apply migrations, create the first admin account when there is none, and join and verify the "
        "local model files: what `manage.py up` runs before it starts web and workers."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default="http://127.0.0.1:8000/", help="The portal's address, for the message.")

    def handle(self, *args: Any, url: str, **options: Any) -> None:
        # One process for the three steps: each Django process spends seconds importing the
        # portal before it does anything (two of them saved on every start).
        call_command("migrate", interactive=False, stdout=self.stdout, stderr=self.stderr)
        call_command("ensure_admin", url=url, stdout=self.stdout, stderr=self.stderr)
        call_command("models", install=True, stdout=self.stdout, stderr=self.stderr)

"""`manage.py tidy_memories [--delete]`: find, and with --delete remove, stored memories that
are questions rather than facts about their user: restated questions ("用户询问……", "User asks
…") and the question-and-answer cards the portal stored before it kept only what users say
about themselves. Without --delete it only counts them and shows a few.

Each removal is mem0's delete: the memory's history keeps a DELETE event. Users' other
memories are not read or changed.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assistant.memory.service import MemoryUnavailable, memories

SHOWN = 5


class Command(BaseCommand):
    help = "Remove stored memories that are questions, not facts about their user (--delete; counts without it)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--delete", action="store_true", help="Delete them (without it: count and show a few).")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            store = memories()
        except MemoryUnavailable as exc:
            raise CommandError(str(exc)) from exc
        found = store.questions()
        users = len({uid for _id, uid, _text in found})
        self.stdout.write(f"{len(found)} stored memories are questions, not facts about their user ({users} users).")
        for _id, _uid, text in found[:SHOWN]:
            self.stdout.write(f"  {' '.join(text.split())[:100]}")
        if not options["delete"]:
            if found:
                self.stdout.write("Run again with --delete to remove them.")
            return
        for memory_id, _uid, _text in found:
            store.drop(memory_id)
        self.stdout.write(self.style.SUCCESS(f"Deleted {len(found)} memories."))

"""`manage.py chat --user <email> [--collection ID ...]`: ask questions on a server shell.

    manage.py chat --user alice@example.com --collection 3
    manage.py chat --user alice@example.com -q "年假可以累积吗？" -q "它最多能累积几天？"

Prints the strategy, the rewrite or plan, each step's search, the answer as it streams, and
its sources with their file paths and pages. Without -q it is an interactive loop (empty
line or Ctrl-D ends it; Ctrl-C stops the answer being written). The answers are the same
as in the web chat: same access rules, same conversation history, stored the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assistant.answering import events as ev
from assistant.answering.pipeline import answer_events
from assistant.answering.session import AskError, start
from assistant.management.commands.evaluate import find_user


class Command(BaseCommand):
    help = "Ask questions over your collections in the terminal, with streamed, cited answers."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="Email or username of the user who asks.")
        parser.add_argument(
            "--collection", type=int, action="append", dest="collections", help="A collection id (repeatable); all "
            "the user may see when left out."
        )  # fmt: skip
        parser.add_argument("--conversation", type=int, help="Continue this conversation.")
        parser.add_argument(
            "-q", "--question", action="append", dest="questions", help="Ask this and exit (repeatable, in order)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = find_user(options["user"])
        conversation: int | None = options["conversation"]
        questions = options["questions"]
        for question in questions if questions else self._prompt():
            try:
                session = start(user, question, collection_ids=options["collections"], conversation_id=conversation)
            except AskError as exc:
                if questions:
                    raise CommandError(exc.message) from None
                self.stderr.write(exc.message)
                continue
            conversation = session.conversation.pk
            cancel = threading.Event()
            events = answer_events(session, cancelled=cancel.is_set)
            failed = self._print(events, cancel)
            if failed and questions:
                raise CommandError(failed)

    def _prompt(self) -> Iterator[str]:
        self.stdout.write("Ask a question (empty line or Ctrl-D to quit).")
        while True:
            try:
                question = input("\n? ").strip()
            except EOFError:
                return
            if not question:
                return
            yield question

    def _print(self, events: Iterator[ev.Event], cancel: threading.Event) -> str:
        """Print each event as it comes; the error message if the answer failed."""
        out = self.stdout
        while True:
            try:
                event = next(events)
            except StopIteration:
                return ""
            except KeyboardInterrupt:
                cancel.set()  # the pipeline stops at its next step and says done
                continue
            match event:
                case ev.StrategyChosen():
                    out.write(self.style.MIGRATE_HEADING(f"[{event.strategy}] ") + event.reason)
                case ev.Rewritten():
                    out.write(f"[rewrite] {event.query}")
                case ev.Planned():
                    out.write("[plan]")
                    for number, step in enumerate(event.steps, start=1):
                        out.write(f"  {number}. {step}")
                case ev.StepFound():
                    out.write(f"[step {event.step}] {len(event.hits)} passages found")
                case ev.MemoryUsed() if event.memories:
                    out.write("[memory] " + " | ".join(memory["text"] for memory in event.memories))
                case ev.Retrieved():
                    out.write(f"[retrieval] {len(event.sources)} passages found\n")
                case ev.AnswerDelta():
                    out.write(event.text, ending="")
                    out.flush()
                case ev.AnswerReplaced():
                    out.write("")
                    out.write(self.style.MIGRATE_HEADING("Checked against the passages:"))
                    out.write(event.text, ending="")
                case ev.Citations():
                    out.write("")
                    if event.citations:
                        out.write(self.style.MIGRATE_HEADING("Sources:"))
                    for cited in event.citations:
                        where = f"{cited['path'] or cited['file']}, {cited['place']}"
                        out.write(f"  [{cited['n']}] {where} (chunk {cited['chunk_id']})")
                case ev.Attachments():
                    for attached in event.attachments:
                        out.write(f"  [{attached['kind']}] {attached['path'] or attached['file']}: {attached['url']}")
                case ev.Done():
                    if event.cancelled:
                        out.write(self.style.WARNING("\n(stopped)"))
                    elif event.abstain:
                        out.write(self.style.WARNING("(the documents do not answer this)"))
                    out.write(f"({event.timings.get('total', 0) / 1000:.1f} s, conversation {event.conversation})")
                case ev.Failed():
                    self.stderr.write(self.style.ERROR(event.message))
                    return event.message

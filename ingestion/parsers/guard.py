"""Parsers run in a child process, with a time limit per page.

A damaged or hostile file can make a parser loop for ever in C code (a PDF's cyclic page
tree, an image decoder's bad stream) or kill its process (a segmentation fault). In the
worker itself either would hold the worker, or end it, and leave the document processing
until the reconciler gives up on it. So `guarded()` forks a child for each parse, and asks it
for one page at a time: a page that takes longer than PORTAL_PARSE_PAGE_SECONDS ends the
child and raises ParseError with a reason; a child that dies raises ParseError saying how.
The worker goes on with its next document, and the run fails with a message a person can
act on.

Code in a parser that waits on something with its own time limit (ffmpeg decoding a video,
LibreOffice rendering slides) calls `allow(seconds)` first, so the page may take that long
too. While it waits the worker calls `waiting` every few seconds: the pipeline beats the
run's heartbeat there and stops if the run was cancelled.

The child is a fork, so it shares what the worker has loaded (settings, the language,
parsers' modules) at no import cost, and pages come back pickled over a pipe. It touches no
database: it only runs parser code, and ends with os._exit. Where fork is missing, or the
limit is 0, parsers run in the worker as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import pickle
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _

from ingestion.parsers.base import ParsedPage, ParseError, Parser
from ingestion.stages import current_profile, profiling

BEAT_SECONDS = 5.0  # how often `waiting` is called while a page takes long
PR_SET_PDEATHSIG = 1  # prctl(2): the child is killed when the worker that forked it dies

_to_parent: Connection | None = None  # set in a child only: where `allow` writes


def allow(seconds: float) -> None:
    """The page being parsed may take `seconds` longer: its parser is about to wait that long
    at most, for a program with its own time limit. Nothing outside a guarded child."""
    if _to_parent is not None:
        _to_parent.send(("allow", seconds))


def guarded(parser: Parser, waiting: Callable[[], None] | None = None) -> Parser:
    """`parser`, read in a child process with a time limit per page (PORTAL_PARSE_PAGE_SECONDS);
    the parser itself where that is 0 or processes cannot fork."""
    if not settings.PARSE_PAGE_SECONDS or not hasattr(os, "fork"):
        return parser
    return GuardedParser(parser, settings.PARSE_PAGE_SECONDS, waiting)


class GuardedParser(Parser):
    def __init__(self, parser: Parser, page_seconds: float, waiting: Callable[[], None] | None = None) -> None:
        self.parser = parser
        self.page_seconds = page_seconds
        self.waiting = waiting

    def pages(self, path: Path) -> Iterator[ParsedPage]:
        return self._pages(lambda: self.parser.pages(path), 1)

    def page_range(self, path: Path, first: int, last: int) -> Iterator[ParsedPage]:
        return self._pages(lambda: self.parser.page_range(path, first, last), first)

    def count(self, path: Path) -> int | None:
        with _Child(lambda: iter([self.parser.count(path)]), self) as child:
            count: int | None = child.next(0)
            return count

    def check(self, path: Path) -> None:
        def checked() -> Iterator[None]:
            self.parser.check(path)
            yield None

        with _Child(checked, self) as child:
            child.next(1)

    def _pages(self, start: Callable[[], Iterator[ParsedPage]], first: int) -> Iterator[ParsedPage]:
        with _Child(start, self) as child:
            number = first
            while True:
                try:
                    page: ParsedPage = child.next(number)
                except StopIteration:
                    return
                yield page
                number = page.number + 1


class _Child:
    """One forked child that runs `start()` and hands its items back one at a time."""

    def __init__(self, start: Callable[[], Iterator[Any]], guard: GuardedParser) -> None:
        self.start = start
        self.guard = guard
        self.pid = 0

    def __enter__(self) -> _Child:
        self.conn, theirs = Pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: it never returns from here
            self.conn.close()
            _serve(theirs, self.start)
        theirs.close()
        self.pid = pid
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()
        self._end()

    def next(self, number: int) -> Any:
        """The child's next item (page `number`, for messages; 0: the file as a whole), within
        the time limit."""
        self.conn.send("next")
        asked = time.monotonic()
        deadline = asked + self.guard.page_seconds
        while True:
            if not self.conn.poll(min(BEAT_SECONDS, max(deadline - time.monotonic(), 0.0))):
                if time.monotonic() >= deadline:
                    self._end(kill=True)
                    raise ParseError(too_slow_message(number, deadline - asked))
                if self.guard.waiting is not None:
                    self.guard.waiting()
                continue
            try:
                kind, *rest = self.conn.recv()
            except (EOFError, OSError):  # the child died: its end of the pipe closed with it
                raise ParseError(crashed_message(number, self._end(kill=False))) from None
            if kind == "allow":
                deadline = max(deadline, time.monotonic() + rest[0] + self.guard.page_seconds)
                continue
            profile = current_profile()
            if profile is not None:
                profile.absorb(*rest[-1])
            if kind == "item":
                return rest[0]
            if kind == "end":
                raise StopIteration
            error, trace = rest[0], rest[1]
            if trace:
                error.add_note(trace)
            raise error

    def _end(self, *, kill: bool = True) -> str:
        """Reap the child, killing it first unless it is known to be ending; say how it ended."""
        if not self.pid:
            return ""
        pid, self.pid = self.pid, 0
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _pid, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            return signal.Signals(os.WTERMSIG(status)).name
        return _("exit status %(code)d") % {"code": os.waitstatus_to_exitcode(status)}


def _serve(conn: Connection, start: Callable[[], Iterator[Any]]) -> None:
    """The child's life: an item for each "next", then exit without running the worker's
    exit handlers (its database connection, its temporary files belong to the worker)."""
    global _to_parent
    code = 0
    try:
        _die_with_parent()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        _to_parent = conn
        with profiling() as profile:
            items = None
            while conn.recv() == "next":
                try:
                    if items is None:
                        items = start()
                    conn.send(("item", next(items), profile.take()))
                except StopIteration:
                    conn.send(("end", profile.take()))
                    break
                except Exception as exc:
                    conn.send(("error", *_portable(exc), profile.take()))
                    break
    except (EOFError, OSError, KeyboardInterrupt):  # the worker stopped asking
        code = 1
    finally:
        os._exit(code)


def _portable(exc: Exception) -> tuple[Exception, str]:
    """The exception as the worker can raise it again, and the child's traceback."""
    trace = "".join(traceback.format_exception(exc))
    if isinstance(exc, ParseError):
        return ParseError(str(exc)), ""
    try:  # only between the worker and its own child, both running the portal's code
        pickle.loads(pickle.dumps(exc))  # noqa: S301
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}"), trace
    return exc, trace


def _die_with_parent() -> None:
    """Linux ends the child when its worker dies, so a hung parse never outlives it."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def too_slow_message(number: int, seconds: float) -> str:
    if not number:
        message = _(
            "Opening the file took longer than %(seconds)d seconds, so reading stopped: the file may "
            "be damaged or made to hang its reader. Open it and save or export it again, then upload "
            "that copy."
        )
    else:
        message = _(
            "Page %(page)d took longer than %(seconds)d seconds to read, so reading stopped: the file "
            "may be damaged or made to hang its reader. Open it and save or export it again, then "
            "upload that copy."
        )
    return message % {"page": number, "seconds": round(seconds)}


def crashed_message(number: int, how: str) -> str:
    if not number:
        message = _(
            "The reader stopped unexpectedly while opening the file (%(how)s): the file may be "
            "damaged. Open it and save or export it again, then upload that copy."
        )
    else:
        message = _(
            "The reader stopped unexpectedly on page %(page)d (%(how)s): the file may be damaged. "
            "Open it and save or export it again, then upload that copy."
        )
    return message % {"page": number, "how": how}

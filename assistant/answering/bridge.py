"""The answer pipeline is synchronous (ORM, model calls); websockets and Server-Sent Events
are async. This runs one pipeline in a worker thread and hands its events to the event loop
as they come, with a flag the pipeline checks to stop early."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import cast

from django.db import close_old_connections, connection

from assistant.answering.types import Event

_END = object()
# Answers run side by side, each in its own thread with its own database connection, in a
# pool of their own: long answers must not take the threads that short sync calls need.
ANSWERS = ThreadPoolExecutor(max_workers=32, thread_name_prefix="answer")
ANSWER_NICENESS = 5


def _with_connection(work: Callable[[], None]) -> None:
    _lower_priority()
    close_old_connections()
    try:
        work()
    finally:
        connection.close()


def _lower_priority() -> None:
    """Answer threads (and the model threads they start) yield the CPU to the event loop, so
    that sockets still get their first event at once while a local model computes. Linux
    keeps a nice value per thread."""
    with contextlib.suppress(AttributeError, OSError):  # not Linux, or not allowed: normal priority
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), ANSWER_NICENESS)


async def events_in_thread(
    produce: Callable[[Callable[[], bool]], Iterator[Event]], cancel: threading.Event
) -> AsyncIterator[Event]:
    """The events of `produce(cancelled)`, run in a thread; leaving the loop early (a closed
    socket, a dropped SSE client) sets `cancel` and waits for the thread to stop."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[object] = asyncio.Queue()

    def put(item: object) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop is gone (server shutting down): nobody is listening
            cancel.set()

    def work() -> None:
        try:
            for event in produce(cancel.is_set):
                put(event)
        except BaseException as exc:  # handed to the reader, which raises it
            put(exc)
        finally:
            put(_END)

    worker = loop.run_in_executor(ANSWERS, _with_connection, work)
    try:
        while (item := await queue.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield cast(Event, item)
    finally:
        cancel.set()
        await asyncio.shield(worker)

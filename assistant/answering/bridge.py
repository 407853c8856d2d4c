"""The answer pipeline is synchronous (ORM, model calls); websockets and Server-Sent Events
are async. This runs one pipeline in a worker thread and hands its events to the event loop
as they come, with a flag the pipeline checks to stop early."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import cast

from django.db import close_old_connections, connection

from assistant.answering.events import Event

_END = object()
# Answers run side by side, each in its own thread with its own database connection, in a
# pool of their own: long answers must not take the threads that short sync calls need.
ANSWERS = ThreadPoolExecutor(max_workers=32, thread_name_prefix="answer")


def _with_connection(work: Callable[[], None]) -> None:
    close_old_connections()
    try:
        work()
    finally:
        connection.close()


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

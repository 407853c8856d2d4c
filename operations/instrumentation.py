"""What the web and Celery processes count for /metrics (common.metrics holds the metrics):
requests per view, websocket connections, and Celery tasks. The apps' own counts (model
calls, pages read, answers) are made where the work is done, in providers, ingestion and
the answer pipeline.

- `RequestMetrics`, the outermost middleware: every response Django makes, labelled by the
  URL's name (never the path: one series per route, not per object id), the method and the
  status class; 5xx responses are errors of kind `request`. The time is until the response
  starts: a streamed answer's own time is in portal_answer_stage_seconds.
- `asgi_requests`: the same for an ASGI app outside Django (the MCP server at /mcp/).
- `websockets`: a consumer's connections accepted, open now and closed by the portal.
- `connect_celery`: each task's duration and end state, by task name, from Celery's signals.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from celery.signals import task_postrun, task_prerun
from django.conf import settings
from django.http import HttpRequest, HttpResponseBase

from common import metrics
from common.middleware import SyncAndAsync

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNRESOLVED = "none"  # no route matched (a 404 for a path that is no URL of the portal)
STATIC = "static"  # a file under STATIC_URL, served by WhiteNoise before any route


def status_class(status: int) -> str:
    return f"{status // 100}xx" if 100 <= status < 600 else "other"


def method_label(method: str | None) -> str:
    """One of the HTTP methods the portal serves, else `other`: a client's made-up method is
    no new series."""
    method = (method or "").upper()
    return method if method in METHODS else "other"


def count_request(view: str, method: str, status: int, seconds: float) -> None:
    label = method_label(method)
    metrics.HTTP_REQUESTS.labels(view, label, status_class(status)).inc()
    metrics.HTTP_SECONDS.labels(view, label).observe(seconds)
    if status >= 500:
        metrics.ERRORS.labels("request", view).inc()


def view_name(request: HttpRequest) -> str:
    """The URL's name; `static` for what WhiteNoise served (no route), else `none`."""
    match = getattr(request, "resolver_match", None)
    if match is not None and match.view_name:
        return str(match.view_name)
    return STATIC if request.path.startswith(settings.STATIC_URL or "/static/") else UNRESOLVED


class RequestMetrics(SyncAndAsync):
    """Counts and times every request; first in MIDDLEWARE, so that it sees the response the
    client gets (an exception below has become a 500 by then) and times all the others."""

    def _call(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        response = self.get_response(request)
        self._count(request, response, started)
        return response

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        response = await self.get_response(request)
        self._count(request, response, started)
        return response

    @staticmethod
    def _count(request: HttpRequest, response: HttpResponseBase, started: float) -> None:
        count_request(view_name(request), request.method or "", response.status_code, time.perf_counter() - started)


# An ASGI application: (scope, receive, send).
Asgi = Callable[
    [dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Coroutine[Any, Any, None]
]


def asgi_requests(app: Asgi, view: str) -> Asgi:
    """An HTTP ASGI app counted as one view: until its response starts, its status."""

    async def counted(scope: dict[str, Any], receive: Any, send: Any) -> None:
        started = time.perf_counter()
        status: list[int] = []

        async def watch(message: Any) -> None:
            if message.get("type") == "http.response.start" and not status:
                status.append(int(message.get("status", 500)))
                count_request(view, scope.get("method", ""), status[0], time.perf_counter() - started)
            await send(message)

        try:
            await app(scope, receive, watch)
        finally:
            if not status:  # it failed before answering: the server answers 500
                count_request(view, scope.get("method", ""), 500, time.perf_counter() - started)

    return counted


def websockets(app: Asgi, consumer: str) -> Any:
    """A websocket consumer counted: connections accepted and open now (from `accept` to
    the end of the connection), and the close codes the portal sends. (Any: Django's path(),
    which Channels' router reads, types its views as returning responses.)"""

    async def counted(scope: dict[str, Any], receive: Any, send: Any) -> None:
        accepted = False

        async def watch(message: Any) -> None:
            nonlocal accepted
            kind = message.get("type")
            if kind == "websocket.accept" and not accepted:
                accepted = True
                metrics.WEBSOCKETS_ACCEPTED.labels(consumer).inc()
                metrics.WEBSOCKETS_OPEN.labels(consumer).inc()
            elif kind == "websocket.close":
                metrics.WEBSOCKETS_CLOSED.labels(consumer, str(int(message.get("code") or 1000))).inc()
            await send(message)

        try:
            await app(scope, receive, watch)
        finally:
            if accepted:
                metrics.WEBSOCKETS_OPEN.labels(consumer).dec()

    return counted


# When each task running in this process started, by task id (a worker process runs one
# task at a time; a thread pool, a few).
_started: dict[str, float] = {}


def _task_started(task_id: str | None = None, **kwargs: Any) -> None:
    if task_id:
        _started[task_id] = time.perf_counter()


def _task_ended(task_id: str | None = None, task: Any = None, state: str | None = None, **kwargs: Any) -> None:
    name = str(getattr(task, "name", "") or "unknown")
    began = _started.pop(task_id or "", None)
    metrics.TASKS.labels(name, (state or "unknown").lower()).inc()
    if began is not None:
        metrics.TASK_SECONDS.labels(name).observe(time.perf_counter() - began)
    if state == "FAILURE":
        metrics.ERRORS.labels("task", name).inc()


def connect_celery() -> None:
    """Time every task run in this process (a worker; or any process running one eagerly)."""
    task_prerun.connect(_task_started, weak=False, dispatch_uid="operations.metrics.task_started")
    task_postrun.connect(_task_ended, weak=False, dispatch_uid="operations.metrics.task_ended")

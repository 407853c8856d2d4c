"""A middleware that runs as the stack around it does: sync under WSGI and in tests, async
under daphne, with no thread per request (Django's MiddlewareMixin runs a sync
process_response in a thread for an async stack). A subclass writes `_call` and `_acall`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponseBase


class SyncAndAsync:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        return self._call(request)

    def _call(self, request: HttpRequest) -> HttpResponseBase:
        raise NotImplementedError

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        raise NotImplementedError

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest


def report(request: HttpRequest, action: Callable[[], object], success: str) -> None:
    """Run an action and tell the person how it went, in pages and in the admin alike:
    each ValidationError message as an error, else `success`."""
    try:
        action()
    except ValidationError as exc:
        for message in exc.messages:
            messages.error(request, message)
    else:
        messages.success(request, success)

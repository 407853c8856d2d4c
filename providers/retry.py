"""Retries with exponential backoff, for failures that may pass (timeouts, 429, 5xx)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from providers.base import ProviderError

T = TypeVar("T")
log = logging.getLogger(__name__)


def pause(seconds: float) -> None:
    """The wait between attempts (tests replace it)."""
    time.sleep(seconds)


def with_retries(call: Callable[[], T], *, attempts: int = 3, base_delay: float = 0.5) -> T:
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except ProviderError as exc:
            if not exc.retryable or attempt == attempts:
                raise
            delay = base_delay * 2 ** (attempt - 1)
            log.warning("%s; retrying in %.1f s (attempt %d of %d)", exc, delay, attempt + 1, attempts)
            pause(delay)
    raise AssertionError("unreachable")

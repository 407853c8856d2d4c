"""Every model call counted and timed (common.metrics), by role and provider: the registry
wraps the public methods of each implementation it builds, so that no backend counts for
itself and a new one is counted as it is registered.

Tokens are what the model reports: a completion's usage (prompt and completion tokens), a
one-pass judgement's prompt tokens read (the local model's `last_read`, the cached prefix
left out), and a streamed answer's pieces as completion tokens (llama.cpp and the
OpenAI-style APIs send one token a piece). A call made inside another call of the same
model (a remote embedder's query is a one-text batch) counts once; the local reranker's
passes of the chat model count as the chat model's calls too.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from common import metrics
from providers.base import ChatResult, Role

# The methods through which the portal calls each role (base.py's protocols, and the local
# models' extras).
METHODS: dict[Role, tuple[str, ...]] = {
    "embedding": ("embed_documents", "embed_query", "embed_few"),
    "image_embedding": ("embed_images", "embed_text"),
    "rerank": ("score",),
    "chat": ("complete", "stream", "yes_minus_no", "choice"),
    "vision": ("describe",),
    "ocr": ("read",),
    "speech": ("transcribe",),
    "tagging": ("tag",),
}
_ONE_PASS = ("yes_minus_no", "choice")


def metered(instance: object, role: Role, provider: str) -> object:
    """`instance` with its calls counted; its class, and so isinstance, unchanged."""
    inside = threading.local()  # set while one of its calls runs on this thread
    for name in METHODS.get(role, ()):
        method = getattr(instance, name, None)
        if callable(method):
            call = _Call(instance, name, role, provider, inside)
            setattr(instance, name, functools.wraps(method)(call.wrap(method)))
    return instance


class _Call:
    def __init__(self, instance: object, name: str, role: Role, provider: str, inside: threading.local) -> None:
        self.instance, self.name, self.role, self.provider, self.inside = instance, name, role, provider, inside

    def wrap(self, method: Callable[..., Any]) -> Callable[..., Any]:
        if self.name == "stream":
            return lambda *args, **kwargs: self._stream(method, *args, **kwargs)
        return lambda *args, **kwargs: self._call(method, *args, **kwargs)

    def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if getattr(self.inside, "active", False):
            return method(*args, **kwargs)
        self.inside.active = True
        started = time.perf_counter()
        try:
            result = method(*args, **kwargs)
        except BaseException:
            self._ended(started, ok=False)
            raise
        finally:
            self.inside.active = False
        self._ended(started, ok=True)
        self._count_tokens(result)
        return result

    def _stream(self, method: Callable[..., Iterator[str]], *args: Any, **kwargs: Any) -> Iterator[str]:
        started = time.perf_counter()
        pieces = 0
        try:
            for piece in method(*args, **kwargs):
                pieces += 1
                yield piece
        except GeneratorExit:  # the reader stopped early (cancelled): not the model's failure
            self._ended(started, ok=True)
            self._tokens("completion", pieces)
            raise
        except BaseException:
            self._ended(started, ok=False)
            raise
        self._ended(started, ok=True)
        self._tokens("completion", pieces)

    def _ended(self, started: float, *, ok: bool) -> None:
        metrics.MODEL_CALLS.labels(self.role, self.provider, "ok" if ok else "error").inc()
        metrics.MODEL_SECONDS.labels(self.role, self.provider).observe(time.perf_counter() - started)
        if not ok:
            metrics.ERRORS.labels("model", self.role).inc()

    def _count_tokens(self, result: object) -> None:
        if isinstance(result, ChatResult):
            self._tokens("prompt", result.prompt_tokens)
            self._tokens("completion", result.completion_tokens)
        elif self.name in _ONE_PASS:
            self._tokens("prompt", getattr(self.instance, "last_read", 0))

    def _tokens(self, kind: str, count: object) -> None:
        if isinstance(count, int) and count > 0:
            metrics.MODEL_TOKENS.labels(self.role, self.provider, kind).inc(count)

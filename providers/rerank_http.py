"""Cohere/Jina-style rerank endpoint (POST {base}/rerank), as vLLM, Xinference, TEI and
many hosted services serve it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from providers.base import ProviderError
from providers.config import RoleConfig
from providers.remote import scores_by_index
from providers.retry import with_retries


class HttpReranker:
    def __init__(self, config: RoleConfig) -> None:
        self.config = config
        self.model_id = f"http:{config.model}"

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        body = {"model": self.config.model, "query": query, "documents": list(passages), "top_n": len(passages)}
        data = with_retries(lambda: self._post(body))
        rows = data.get("results") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            raise ProviderError("rerank", "http", "malformed response: no results")
        return scores_by_index(self.config, rows, len(passages))

    def _post(self, body: dict[str, Any]) -> Any:
        headers = {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}
        url = f"{self.config.base_url}/rerank"
        try:
            response = httpx.post(url, json=body, headers=headers, timeout=self.config.timeout)
        except httpx.TimeoutException as exc:
            raise ProviderError(
                "rerank", "http", f"no answer from {url} within {self.config.timeout:.0f} s", retryable=True
            ) from exc
        except httpx.HTTPError as exc:
            raise ProviderError(
                "rerank", "http", f"cannot reach {url}: check BASE_URL_RERANK ({exc})", retryable=True
            ) from exc
        if response.status_code in (401, 403):
            raise ProviderError(
                "rerank", "http", f"the API key was refused ({response.status_code}): check API_KEY_RERANK"
            )
        if response.status_code >= 400:
            retry = response.status_code == 429 or response.status_code >= 500
            raise ProviderError(
                "rerank",
                "http",
                f"the endpoint answered {response.status_code}: {response.text[:300]}",
                retryable=retry,
            )
        try:
            return response.json()
        except ValueError as exc:
            raise ProviderError("rerank", "http", "malformed response: not JSON") from exc

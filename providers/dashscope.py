"""Alibaba Cloud Model Studio (DashScope) through its SDK: Qwen chat with streaming, qwen-vl
vision, text embeddings (text-embedding-v3/v4), multimodal embeddings (text and images in
one space: the image role) and the rerank API. The SDK returns errors as responses; they
become ProviderErrors that name the setting to fix, retried where that may help."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from providers.base import ChatMessage, ChatResult, ImageInput, ProviderError, json_mode_args, message_dicts
from providers.config import RoleConfig
from providers.openai_compat import data_url
from providers.remote import BatchedTextEmbedder, scores_by_index
from providers.retry import with_retries

# DashScope caps texts per embedding call (10 for text-embedding-v3/v4).
EMBEDDING_BATCH = 10


class _DashScope:
    def __init__(self, config: RoleConfig) -> None:
        self.config = config
        self.model_id = f"dashscope:{config.model}"

    def _error(self, message: str, *, retryable: bool = False) -> ProviderError:
        return ProviderError(self.config.role, "dashscope", message, retryable=retryable)

    def _request(self, call: Callable[..., Any], **kwargs: Any) -> Any:
        """One SDK call with the role's key, address and timeout; errors mapped, retried."""
        import requests

        if not self.config.api_key:
            raise self._error(f"no API key: set API_KEY_{self.config.env} or DASHSCOPE_API_KEY")

        def attempt() -> Any:
            try:
                response = call(
                    model=self.config.model,
                    api_key=self.config.api_key,
                    base_address=self.config.base_url,
                    request_timeout=self.config.timeout,
                    **kwargs,
                )
            except requests.Timeout as exc:
                raise self._error(
                    f"no answer from {self.config.base_url} within {self.config.timeout:.0f} s "
                    f"(TIMEOUT_{self.config.env})",
                    retryable=True,
                ) from exc
            except requests.RequestException as exc:
                raise self._error(
                    f"cannot reach {self.config.base_url}: check BASE_URL_{self.config.env} or DASHSCOPE_BASE_URL",
                    retryable=True,
                ) from exc
            if not isinstance(response, Iterator):
                self._check(response)
            return response

        return with_retries(attempt)

    def _check(self, response: Any) -> None:
        status = int(getattr(response, "status_code", 0) or 0)
        if status == 200:
            if getattr(response, "output", None) is None:
                raise self._error("malformed response: no output")
            return
        code, message = getattr(response, "code", "") or "", getattr(response, "message", "") or ""
        env = self.config.env
        if status in (401, 403) or code == "InvalidApiKey":
            raise self._error(f"the API key was refused ({code or status}): check API_KEY_{env} or DASHSCOPE_API_KEY")
        if status == 404 or code == "ModelNotFound":
            raise self._error(f"model {self.config.model!r} not found ({code or status}): check MODEL_{env}")
        if status == 429 or "Throttling" in code:
            raise self._error(f"rate limited ({code or status})", retryable=True)
        raise self._error(f"the API answered {status} {code}: {message[:300]}", retryable=status >= 500)


class DashScopeChatModel(_DashScope):
    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_mode: bool = False,
        max_tokens: int = 512,
        temperature: float = 0.2,
    ) -> ChatResult:
        from dashscope import Generation

        extra = json_mode_args(json_mode)
        response = self._request(
            Generation.call,
            messages=message_dicts(messages),
            result_format="message",
            max_tokens=max_tokens,
            temperature=temperature,
            **extra,
        )
        try:
            text = response.output.choices[0].message.content or ""
        except (AttributeError, IndexError, TypeError) as exc:
            raise self._error("malformed response: no choices") from exc
        usage = response.usage or {}
        return ChatResult(
            text=str(text),
            model=self.model_id,
            prompt_tokens=int(usage.get("input_tokens", 0)),
            completion_tokens=int(usage.get("output_tokens", 0)),
        )

    def stream(
        self, messages: Sequence[ChatMessage], *, max_tokens: int = 512, temperature: float = 0.2
    ) -> Iterator[str]:
        from dashscope import Generation

        chunks = self._request(
            Generation.call,
            messages=message_dicts(messages),
            result_format="message",
            max_tokens=max_tokens,
            temperature=temperature,
            stream=True,
            incremental_output=True,
        )
        for chunk in chunks:
            self._check(chunk)
            choices = chunk.output.choices or []
            if choices and choices[0].message.content:
                yield str(choices[0].message.content)


class DashScopeVisionModel(_DashScope):
    def describe(self, image: ImageInput, prompt: str) -> str:
        from dashscope import MultiModalConversation

        content = [{"image": data_url(image)}, {"text": prompt}]
        response = self._request(MultiModalConversation.call, messages=[{"role": "user", "content": content}])
        try:
            parts = response.output.choices[0].message.content
        except (AttributeError, IndexError, TypeError) as exc:
            raise self._error("malformed response: no choices") from exc
        if isinstance(parts, str):
            return parts.strip()
        return "".join(part.get("text", "") for part in parts).strip()


class DashScopeEmbedder(_DashScope, BatchedTextEmbedder):
    batch_size = EMBEDDING_BATCH

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        from dashscope import TextEmbedding

        extra = {"dimension": self.config.dims} if self.config.dims else {}
        response = self._request(TextEmbedding.call, input=batch, **extra)
        return _ordered(self, response.output.get("embeddings"), len(batch), "text_index")


class DashScopeImageEmbedder(_DashScope):
    """Images and text in one space (multimodal-embedding-v1), so a text query finds images."""

    _dims: int | None = None

    @property
    def dims(self) -> int:
        if self._dims is None:
            self._dims = len(self.embed_text("dimension probe"))
        return self._dims

    def _embed(self, contents: list[dict[str, str]]) -> list[list[float]]:
        from dashscope import MultiModalEmbedding

        response = self._request(MultiModalEmbedding.call, input=contents)
        return _ordered(self, response.output.get("embeddings"), len(contents), "index")

    def embed_images(self, images: Sequence[ImageInput]) -> list[list[float]]:
        return [self._embed([{"image": data_url(image)}])[0] for image in images]

    def embed_text(self, text: str) -> list[float]:
        return self._embed([{"text": text}])[0]


class DashScopeReranker(_DashScope):
    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        from dashscope import TextReRank

        if not passages:
            return []
        response = self._request(
            TextReRank.call, query=query, documents=list(passages), top_n=len(passages), return_documents=False
        )
        return scores_by_index(self.config, response.output.get("results") or [], len(passages))


def _ordered(client: _DashScope, rows: Any, expected: int, index_key: str) -> list[list[float]]:
    try:
        ordered = sorted(rows, key=lambda row: int(row[index_key]))
        vectors = [[float(x) for x in row["embedding"]] for row in ordered]
    except (KeyError, TypeError, ValueError) as exc:
        raise client._error(f"malformed response: {exc!r}") from exc
    if len(vectors) != expected:
        raise client._error(f"malformed response: {len(vectors)} embeddings for {expected} inputs")
    return vectors

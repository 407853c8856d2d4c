"""Any OpenAI-compatible API (OpenAI, DeepSeek, GLM, Moonshot, Ollama, vLLM...): chat with
streaming and JSON mode, vision with base64 images, embeddings. The SDK's own retries are
off so that every backend retries the same way (retry.py) and errors name the setting to fix."""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from providers.base import ChatMessage, ChatResult, ImageInput, ProviderError, json_mode_args, message_dicts
from providers.config import RoleConfig
from providers.remote import BatchedTextEmbedder
from providers.retry import with_retries


def map_error(config: RoleConfig, exc: Exception) -> ProviderError:
    """An SDK exception as a ProviderError that says what to fix."""
    import openai

    role, provider, env = config.role, config.provider, config.env
    if isinstance(exc, openai.APITimeoutError):
        return ProviderError(
            role,
            provider,
            f"no answer from {config.base_url} within {config.timeout:.0f} s (TIMEOUT_{env})",
            retryable=True,
        )
    if isinstance(exc, openai.APIConnectionError):
        return ProviderError(role, provider, f"cannot reach {config.base_url}: check BASE_URL_{env}", retryable=True)
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return ProviderError(role, provider, f"the API key was refused ({exc.status_code}): check API_KEY_{env}")
    if isinstance(exc, openai.RateLimitError):
        return ProviderError(role, provider, "rate limited by the provider (429)", retryable=True)
    if isinstance(exc, openai.NotFoundError):
        return ProviderError(role, provider, f"model {config.model!r} or endpoint not found (404): check MODEL_{env}")
    if isinstance(exc, openai.APIStatusError):
        retry = exc.status_code >= 500
        return ProviderError(role, provider, f"the provider answered {exc.status_code}: {_brief(exc)}", retryable=retry)
    return ProviderError(role, provider, f"unexpected response: {exc}")


def _brief(exc: Any) -> str:
    return str(getattr(exc, "message", exc))[:300]


class _Client:
    def __init__(self, config: RoleConfig) -> None:
        self.config = config
        self.model_id = f"{config.provider}:{config.model}"

    @cached_property
    def client(self) -> Any:
        import openai

        if not self.config.api_key and "api.openai.com" in self.config.base_url:
            raise ProviderError(
                self.config.role, self.config.provider, f"no API key: set API_KEY_{self.config.env} or OPENAI_API_KEY"
            )
        return openai.OpenAI(
            base_url=self.config.base_url,
            api_key=self.config.api_key or "none",
            timeout=self.config.timeout,
            max_retries=0,
        )

    def _call(self, call: Any) -> Any:
        import openai

        def attempt() -> Any:
            try:
                return call()
            except openai.OpenAIError as exc:
                raise map_error(self.config, exc) from exc
            except ValueError as exc:  # a body that is not the JSON the API promises
                raise self._malformed(f"not valid JSON ({exc})") from exc

        return with_retries(attempt)

    def _malformed(self, what: str) -> ProviderError:
        return ProviderError(self.config.role, self.config.provider, f"malformed response: {what}")


class OpenAIChatModel(_Client):
    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_mode: bool = False,
        max_tokens: int = 512,
        temperature: float = 0.2,
    ) -> ChatResult:
        extra = json_mode_args(json_mode)
        response = self._call(
            lambda: self.client.chat.completions.create(
                model=self.config.model,
                messages=message_dicts(messages),
                max_tokens=max_tokens,
                temperature=temperature,
                **extra,
            )
        )
        try:
            text = response.choices[0].message.content or ""
        except (AttributeError, IndexError) as exc:
            raise self._malformed("no choices in the completion") from exc
        usage = response.usage
        return ChatResult(
            text=text,
            model=self.model_id,
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        )

    def stream(
        self, messages: Sequence[ChatMessage], *, max_tokens: int = 512, temperature: float = 0.2
    ) -> Iterator[str]:
        import openai

        # Retrying is safe until the first token arrives, not after.
        chunks = self._call(
            lambda: self.client.chat.completions.create(
                model=self.config.model,
                messages=message_dicts(messages),
                max_tokens=max_tokens,
                temperature=temperature,
                stream=True,
            )
        )
        events = 0
        try:
            for chunk in chunks:
                events += 1
                if chunk.choices and chunk.choices[0].delta.content:
                    yield chunk.choices[0].delta.content
        except openai.OpenAIError as exc:
            raise map_error(self.config, exc) from exc
        except ValueError as exc:  # an event that is not the JSON the API promises
            raise self._malformed(f"a streamed event is not valid JSON ({exc})") from exc
        if not events:  # e.g. a plain body where server-sent events were due: not an empty answer
            raise self._malformed("no events in the streamed answer")


class OpenAIVisionModel(_Client):
    def describe(self, image: ImageInput, prompt: str) -> str:
        content = [{"type": "text", "text": prompt}, {"type": "image_url", "image_url": {"url": data_url(image)}}]
        response = self._call(
            lambda: self.client.chat.completions.create(
                model=self.config.model,
                messages=[{"role": "user", "content": content}],
                max_tokens=300,
            )
        )
        try:
            return str(response.choices[0].message.content or "").strip()
        except (AttributeError, IndexError) as exc:
            raise self._malformed("no choices in the completion") from exc


class OpenAIEmbedder(_Client, BatchedTextEmbedder):
    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        extra = {"dimensions": self.config.dims} if self.config.dims else {}
        response = self._call(
            lambda: self.client.embeddings.create(
                model=self.config.model, input=batch, encoding_format="float", **extra
            )
        )
        return [[float(x) for x in row.embedding] for row in sorted(response.data, key=lambda row: row.index)]


def data_url(image: ImageInput) -> str:
    """An image as a base64 data URL, the way OpenAI-style vision APIs take it."""
    from common.image_types import image_type

    data = image if isinstance(image, bytes) else Path(image).read_bytes()
    named = None if isinstance(image, bytes) else mimetypes.guess_type(str(image))[0]
    mime = named or image_type(data[:16]) or "image/jpeg"
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"

"""The roles every feature calls models through, one small interface each.

Implementations live in one module per backend (`local/`, `openai_compat.py`,
`rerank_http.py`, `dashscope.py`); `registry.py` maps each (role, provider) to one of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from portal.redact import scrub

Role = Literal["embedding", "image_embedding", "rerank", "chat", "vision", "ocr", "speech", "tagging"]
ROLES: tuple[Role, ...] = ("embedding", "image_embedding", "rerank", "chat", "vision", "ocr", "speech", "tagging")

# An image as a path, or as encoded bytes (PNG, JPEG, WebP...).
ImageInput = Path | str | bytes
AudioInput = Path | str


class ProviderError(RuntimeError):
    """A model call failed; the message names the role, the provider and what to fix."""

    def __init__(self, role: str, provider: str, message: str, *, retryable: bool = False) -> None:
        # A provider may echo a key or a URL with its password back: neither is repeated.
        super().__init__(f"{role} model ({provider}): {scrub(message)}")
        self.role, self.provider, self.retryable = role, provider, retryable


class NotAvailable(ProviderError):  # noqa: N818 (a state of the role, not a fault)
    """The role has no model here (e.g. image embeddings offline); callers degrade."""


@dataclass(frozen=True)
class ChatMessage:
    role: Literal["system", "user", "assistant"]
    content: str


def message_dicts(messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
    """Messages in the {"role", "content"} form every chat API here takes."""
    return [{"role": m.role, "content": m.content} for m in messages]


def json_mode_args(json_mode: bool) -> dict[str, Any]:
    """The request option that asks an OpenAI-style chat API for a JSON object."""
    return {"response_format": {"type": "json_object"}} if json_mode else {}


@dataclass(frozen=True)
class ChatResult:
    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class OcrLine:
    text: str
    # Four (x, y) corners, clockwise from top-left, in image pixels.
    box: tuple[tuple[float, float], ...]
    confidence: float


@dataclass(frozen=True)
class OcrResult:
    lines: tuple[OcrLine, ...]
    width: int
    height: int

    @property
    def text(self) -> str:
        return "\n".join(line.text for line in self.lines)


@dataclass(frozen=True)
class Segment:
    start: float
    end: float
    text: str


@dataclass(frozen=True)
class Transcript:
    segments: tuple[Segment, ...]
    language: str = ""

    @property
    def text(self) -> str:
        return " ".join(segment.text.strip() for segment in self.segments).strip()


@dataclass(frozen=True)
class ModelInfo:
    role: Role
    provider: str
    model_id: str
    details: dict[str, object] = field(default_factory=dict)


@runtime_checkable
class TextEmbedder(Protocol):
    model_id: str

    @property
    def dims(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


@runtime_checkable
class ImageEmbedder(Protocol):
    model_id: str

    @property
    def dims(self) -> int: ...

    def embed_images(self, images: Sequence[ImageInput]) -> list[list[float]]: ...

    def embed_text(self, text: str) -> list[float]: ...


@runtime_checkable
class Reranker(Protocol):
    model_id: str

    def score(self, query: str, passages: Sequence[str]) -> list[float]: ...


@runtime_checkable
class ChatModel(Protocol):
    model_id: str

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_mode: bool = False,
        max_tokens: int = 512,
        temperature: float = 0.2,
    ) -> ChatResult: ...

    def stream(
        self, messages: Sequence[ChatMessage], *, max_tokens: int = 512, temperature: float = 0.2
    ) -> Iterator[str]: ...


@runtime_checkable
class VisionModel(Protocol):
    model_id: str

    def describe(self, image: ImageInput, prompt: str) -> str: ...


@dataclass(frozen=True)
class Tag:
    """What a picture shows: a label in English and Chinese, its family (dog for a golden
    retriever), the model's confidence, and for an object its box in image pixels."""

    en: str
    zh: str
    family_en: str
    family_zh: str
    score: float
    box: tuple[float, float, float, float] | None = None


@dataclass(frozen=True)
class Tags:
    labels: tuple[Tag, ...]  # the whole picture's classes, best first
    objects: tuple[Tag, ...]  # objects found in it, with boxes, best first


@runtime_checkable
class PictureTagger(Protocol):
    model_id: str

    def tag(self, image: ImageInput) -> Tags: ...


@runtime_checkable
class OCR(Protocol):
    model_id: str

    def read(self, image: ImageInput) -> OcrResult: ...


@runtime_checkable
class SpeechToText(Protocol):
    model_id: str

    def transcribe(self, audio: AudioInput) -> Transcript: ...


def check_dims(embedder: TextEmbedder | ImageEmbedder, expected: int, *, role: Role, provider: str) -> None:
    """Refuse to write vectors of the wrong size into an index (or mem0's store)."""
    if embedder.dims != expected:
        raise ProviderError(
            role,
            provider,
            f"{embedder.model_id} gives {embedder.dims}-dimensional vectors but the index expects {expected}: "
            "build a new index version for this model, or configure the model the index was built with.",
        )

"""Models behind one small interface per role; see base.py for the roles and registry.py
for how a provider name becomes an implementation."""

from providers.base import NotAvailable, ProviderError
from providers.registry import (
    available,
    chat_model,
    image_embedder,
    ocr,
    reranker,
    speech_to_text,
    text_embedder,
    vision_model,
)

__all__ = [
    "NotAvailable",
    "ProviderError",
    "available",
    "chat_model",
    "image_embedder",
    "ocr",
    "reranker",
    "speech_to_text",
    "text_embedder",
    "vision_model",
]

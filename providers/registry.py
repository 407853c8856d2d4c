"""Maps (role, provider) to an implementation, built lazily once per process.

Implementations are named by import path so that a process only imports the backends it
uses (llama.cpp, onnxruntime and the SDKs are heavy). Thread-safe: web and worker threads
share one instance per role.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any, cast

from django.conf import settings

from providers.base import (
    OCR,
    ChatModel,
    ImageEmbedder,
    NotAvailable,
    PictureTagger,
    Reranker,
    Role,
    SpeechToText,
    TextEmbedder,
    VisionModel,
)
from providers.config import RoleConfig
from providers.metering import metered

IMPLEMENTATIONS: dict[tuple[Role, str], str] = {
    ("embedding", "local"): "providers.local.embedder:LocalEmbedder",
    ("embedding", "openai"): "providers.openai_compat:OpenAIEmbedder",
    ("embedding", "dashscope"): "providers.dashscope:DashScopeEmbedder",
    ("image_embedding", "dashscope"): "providers.dashscope:DashScopeImageEmbedder",
    ("rerank", "local"): "providers.local.rerank:ChatJudgeReranker",
    ("rerank", "http"): "providers.rerank_http:HttpReranker",
    ("rerank", "dashscope"): "providers.dashscope:DashScopeReranker",
    ("chat", "local"): "providers.local.chat:LocalChatModel",
    ("chat", "openai"): "providers.openai_compat:OpenAIChatModel",
    ("chat", "dashscope"): "providers.dashscope:DashScopeChatModel",
    ("vision", "openai"): "providers.openai_compat:OpenAIVisionModel",
    ("vision", "dashscope"): "providers.dashscope:DashScopeVisionModel",
    ("ocr", "local"): "providers.local.ocr:LocalOCR",
    ("speech", "local"): "providers.local.speech:LocalSpeechToText",
    ("tagging", "local"): "providers.local.tagger:LocalPictureTagger",
}

# What to tell a person when a role has no model with the current settings.
UNAVAILABLE = {
    "image_embedding": "no offline image embedding model exists; images are found by their OCR text and "
    "captions instead (PROVIDER_IMAGE_EMBEDDING=dashscope embeds images and text in one space)",
    "vision": "no offline vision model exists; set PROVIDER_VISION=openai or dashscope for image captions",
    "rerank": "reranking is off; set PROVIDER_RERANK=local (the chat model as a judge, slow), http or dashscope",
    "speech": "speech to text is off; set PROVIDER_SPEECH=local (Whisper base, offline)",
    "tagging": "picture tags are off; set PROVIDER_TAGGING=local (ImageNet and COCO models, offline)",
}

_instances: dict[Role, object] = {}
# Reentrant: building one role may build another (the local reranker uses the chat model).
_lock = threading.RLock()


def role_config(role: Role) -> RoleConfig:
    config: RoleConfig = settings.MODEL_ROLES[role]
    return config


def get(role: Role) -> Any:
    """The role's implementation, built on first use; NotAvailable when it has none."""
    instance = _instances.get(role)
    if instance is not None:
        return instance
    with _lock:
        if role not in _instances:
            _instances[role] = build(role_config(role))
        return _instances[role]


def build(config: RoleConfig) -> object:
    path = IMPLEMENTATIONS.get((config.role, config.provider))
    if path is None:
        raise NotAvailable(config.role, config.provider, UNAVAILABLE.get(config.role, "not available"))
    module_name, _, attr = path.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    return metered(factory(config), config.role, config.provider)  # its calls counted (common.metrics)


def reset() -> None:
    """Forget built instances (tests, or after a settings change)."""
    with _lock:
        _instances.clear()


def text_embedder() -> TextEmbedder:
    return cast(TextEmbedder, get("embedding"))


def image_embedder() -> ImageEmbedder:
    return cast(ImageEmbedder, get("image_embedding"))


def reranker() -> Reranker:
    return cast(Reranker, get("rerank"))


def chat_model() -> ChatModel:
    return cast(ChatModel, get("chat"))


def vision_model() -> VisionModel:
    return cast(VisionModel, get("vision"))


def ocr() -> OCR:
    return cast(OCR, get("ocr"))


def speech_to_text() -> SpeechToText:
    return cast(SpeechToText, get("speech"))


def picture_tagger() -> PictureTagger:
    return cast(PictureTagger, get("tagging"))


def available(role: Role) -> bool:
    """Whether the role has an implementation configured (without loading it)."""
    config = role_config(role)
    return (config.role, config.provider) in IMPLEMENTATIONS

"""Per-role model settings from the environment (read by portal/settings.py, so it cannot use them).

For each role ROLE in EMBEDDING, IMAGE_EMBEDDING, RERANK, CHAT, VISION, OCR, SPEECH, TAGGING:
PROVIDER_<ROLE>, MODEL_<ROLE>, BASE_URL_<ROLE>, API_KEY_<ROLE>, DIMS_<ROLE>,
TIMEOUT_<ROLE> (seconds), THREADS_<ROLE>. Keys and base URLs fall back to the provider's
shared ones (OPENAI_API_KEY / OPENAI_BASE_URL, DASHSCOPE_API_KEY / DASHSCOPE_BASE_URL).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from providers.base import ROLES, Role

# Which providers each role accepts, the default first.
PROVIDERS: dict[Role, tuple[str, ...]] = {
    "embedding": ("local", "openai", "dashscope"),
    "image_embedding": ("none", "local", "dashscope"),
    "rerank": ("none", "local", "http", "dashscope"),
    "chat": ("local", "openai", "dashscope"),
    "vision": ("none", "local", "openai", "dashscope"),
    "ocr": ("local",),
    "speech": ("local", "none"),
    "tagging": ("local", "none"),
}
DEFAULT_MODELS: dict[tuple[Role, str], str] = {
    ("embedding", "local"): "multilingual-e5-small-q4",
    ("chat", "local"): "qwen2.5-coder-1.5b-instruct-q4_k_m",
    ("rerank", "local"): "chat-model-yes-no-judge",
    ("ocr", "local"): "rapidocr-pp-ocr",
    ("speech", "local"): "whisper-base",
    ("tagging", "local"): "efficientnet-lite3+ssd-mobilenet-v2-coco",
    ("embedding", "openai"): "text-embedding-3-small",
    ("chat", "openai"): "gpt-4o-mini",
    ("vision", "openai"): "gpt-4o-mini",
    ("embedding", "dashscope"): "text-embedding-v4",
    ("image_embedding", "dashscope"): "multimodal-embedding-v1",
    ("chat", "dashscope"): "qwen-plus",
    ("vision", "dashscope"): "qwen-vl-plus",
    ("rerank", "dashscope"): "gte-rerank-v2",
}
SHARED = {
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL", "https://api.openai.com/v1"),
    "http": ("RERANK_API_KEY", "RERANK_BASE_URL", ""),
    "dashscope": ("DASHSCOPE_API_KEY", "DASHSCOPE_BASE_URL", "https://dashscope.aliyuncs.com/api/v1"),
}


@dataclass(frozen=True)
class RoleConfig:
    role: Role
    provider: str
    model: str
    base_url: str = ""
    api_key: str = ""
    dims: int | None = None
    timeout: float = 60.0
    threads: int = 2

    @property
    def env(self) -> str:
        """The suffix of this role's variables, e.g. CHAT in PROVIDER_CHAT."""
        return self.role.upper()

    def __repr__(self) -> str:  # never print keys
        return f"RoleConfig({self.role}={self.provider}:{self.model})"


def _get(name: str) -> str:
    return os.environ.get(name, "").strip()


def _number(name: str, default: float, cast: type[int] | type[float]) -> float:
    raw = _get(name)
    if not raw:
        return default
    try:
        value = cast(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, not {raw!r}.") from None
    if value <= 0:
        raise ImproperlyConfigured(f"{name} must be above zero, not {raw!r}.")
    return value


def load_role(role: Role, default_threads: int) -> RoleConfig:
    suffix = role.upper()
    allowed = PROVIDERS[role]
    provider = (_get(f"PROVIDER_{suffix}") or allowed[0]).lower()
    if provider not in allowed:
        raise ImproperlyConfigured(f"PROVIDER_{suffix} must be one of {', '.join(allowed)}, not {provider!r}.")
    key_var, url_var, url_default = SHARED.get(provider, ("", "", ""))
    base_url = _get(f"BASE_URL_{suffix}") or (_get(url_var) if url_var else "") or url_default
    if provider == "http" and not base_url:
        raise ImproperlyConfigured(f"BASE_URL_{suffix} (or RERANK_BASE_URL) must be set for PROVIDER_{suffix}=http.")
    dims = _get(f"DIMS_{suffix}")
    return RoleConfig(
        role=role,
        provider=provider,
        model=_get(f"MODEL_{suffix}") or DEFAULT_MODELS.get((role, provider), ""),
        base_url=base_url.rstrip("/"),
        api_key=_get(f"API_KEY_{suffix}") or (_get(key_var) if key_var else ""),
        dims=int(_number(f"DIMS_{suffix}", 0, int)) if dims else None,
        timeout=float(_number(f"TIMEOUT_{suffix}", 60.0, float)),
        threads=int(_number(f"THREADS_{suffix}", default_threads, int)),
    )


def load_roles(default_threads: int) -> dict[Role, RoleConfig]:
    return {role: load_role(role, default_threads) for role in ROLES}

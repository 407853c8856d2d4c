from __future__ import annotations

import threading

import pytest
from django.core.exceptions import ImproperlyConfigured

from providers import registry
from providers.base import ProviderError, check_dims
from providers.config import load_role


def test_it_builds_one_instance_per_role_across_threads(settings):
    registry.reset()
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(registry.get("embedding"))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(instance) for instance in seen}) == 1
    assert registry.text_embedder() is seen[0]


def test_it_refuses_vectors_of_the_wrong_size():
    embedder = registry.text_embedder()
    check_dims(embedder, 384, role="embedding", provider="local")
    with pytest.raises(ProviderError, match="gives 384-dimensional vectors but the index expects 1024"):
        check_dims(embedder, 1024, role="embedding", provider="local")


def test_it_reads_a_role_with_shared_keys_and_defaults(monkeypatch):
    monkeypatch.setenv("PROVIDER_CHAT", "openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-shared")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1/")
    monkeypatch.setenv("MODEL_CHAT", "qwen2.5:7b")
    config = load_role("chat", default_threads=2)
    assert (config.provider, config.model, config.api_key) == ("openai", "qwen2.5:7b", "sk-shared")
    assert config.base_url == "http://localhost:11434/v1"
    assert "sk-shared" not in repr(config)
    monkeypatch.setenv("API_KEY_CHAT", "sk-own")
    assert load_role("chat", default_threads=2).api_key == "sk-own"


def test_it_defaults_to_dashscopes_address(monkeypatch):
    monkeypatch.setenv("PROVIDER_EMBEDDING", "dashscope")
    config = load_role("embedding", default_threads=2)
    assert config.base_url == "https://dashscope.aliyuncs.com/api/v1"
    assert config.model == "text-embedding-v4"


def test_it_needs_an_address_for_the_http_reranker(monkeypatch):
    monkeypatch.setenv("PROVIDER_RERANK", "http")
    with pytest.raises(ImproperlyConfigured, match="BASE_URL_RERANK"):
        load_role("rerank", default_threads=2)


def test_a_role_built_from_another_does_not_deadlock(monkeypatch, settings):
    """The local reranker asks the registry for the chat model while being built."""
    monkeypatch.setenv("PROVIDER_RERANK", "local")
    settings.MODEL_ROLES = {**settings.MODEL_ROLES, "rerank": load_role("rerank", 1)}
    registry.reset()
    built: list[object] = []
    thread = threading.Thread(target=lambda: built.append(registry.reranker()), daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), "registry.reranker() deadlocked"
    registry.reset()
    assert built[0].model_id.startswith("local:")  # type: ignore[attr-defined]

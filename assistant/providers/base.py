"""Kept for the importers not yet moved to `providers.base` (assistant/answering/pipeline.py
and assistant/retrieval/search.py); see __init__.py."""

from providers.base import ChatModel, ProviderError

__all__ = ["ChatModel", "ProviderError"]

"""Kept for the importers not yet moved to `providers` (assistant/answering/pipeline.py and
assistant/retrieval/search.py): the model providers are a package of their own now, below
ingestion, which uses them too. `registry` is that module itself, so that a test's monkeypatch
of it reaches these importers as well."""

from providers import registry

__all__ = ["registry"]

"""Kept for the importers not yet moved to common.language (assistant/answering/pipeline.py
and prompts.py): the language helpers live in the base layer now, since ingestion uses them too."""

from common.language import Language, language_of

__all__ = ["Language", "language_of"]

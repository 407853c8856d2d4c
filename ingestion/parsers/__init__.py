"""One module per format; importing this package registers them all (see base.parser_for)."""

from ingestion.parsers import pdf, text

__all__ = ["pdf", "text"]

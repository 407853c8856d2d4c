"""The base layer: small helpers that several apps need and that know none of them (which
language a text is in, what image type some bytes announce, a PDF page drawn as PNG).

The layers, bottom to top, are checked by import-linter ([tool.importlinter] in
pyproject.toml): common and the portal's user model and limits; knowledge and the model
providers; ingestion; assistant; the portal's wiring (settings, URLs, processes)."""

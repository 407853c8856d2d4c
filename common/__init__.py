"""The base layer: small helpers that several apps need and that know none of them (which
language a text is in, what image type some bytes announce, a PDF page drawn as PNG).

The layers, and what may import what, are written down and checked in pyproject.toml
([tool.importlinter]); CI runs `lint-imports`."""

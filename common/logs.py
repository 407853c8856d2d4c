"""Log lines without what people wrote or uploaded.

At INFO and above a line says what happened with ids and counts: a message, a document, a
chunk, how many names or sentences. It never carries a question, an answer, a document's
text, a table's cell or a memory: those belong to a user or a collection, and a log store
keeps them long after the user deleted them, readable by whoever reads the logs.
`with_content` writes the same line again with the content at DEBUG, which only
`LOG_LEVEL=debug` turns on (off by default), for a person debugging on their own data."""

from __future__ import annotations

import logging

CONTENT_CHARS = 500  # of each value in a DEBUG line


def with_content(log: logging.Logger, level: int, message: str, *args: object, **content: object) -> None:
    """`message % args` at `level`; at DEBUG, the same line followed by each `content` value."""
    log.log(level, message, *args, stacklevel=2)
    if content and log.isEnabledFor(logging.DEBUG):
        said = "; ".join(f"{name} {repr(value)[:CONTENT_CHARS]}" for name, value in content.items())
        log.debug(message + " | %s", *args, said, stacklevel=2)

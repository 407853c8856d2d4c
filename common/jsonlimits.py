"""JSON from outside (API bodies, JSON Lines imports) read with a bound on nesting.

Python's decoder recurses once per level: a body of 100,000 `[` ends in RecursionError, which
a view does not expect (a 500), and hundreds of levels still reach code that walks the value
recursively. No request of the portal nests deeper than a few levels, so anything deeper
than MAX_DEPTH is refused before it is decoded, with a ValueError a caller turns into a 400.

JSON Lines are split on "\\n" only (`jsonl_lines`): `str.splitlines` also splits on U+2028,
U+0085 and other characters that JSON allows unescaped inside a string, which would cut one
valid line into two bad ones."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from django.utils.translation import gettext as _

MAX_DEPTH = 32  # arrays and objects inside one another; the deepest request body the API takes has 4

# A JSON string (with its escapes) or one bracket: strings are skipped whole, so brackets
# inside them do not count.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)


class TooDeep(ValueError):
    """The text nests arrays and objects deeper than allowed."""


def check_depth(text: str, max_depth: int = MAX_DEPTH) -> None:
    """TooDeep when arrays and objects nest deeper than `max_depth` (the text need not be
    valid JSON: the decoder judges that afterwards)."""
    if text.count("[") + text.count("{") <= max_depth:
        return  # cannot nest deeper than it has brackets: the common case costs two counts
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > max_depth:
                raise TooDeep(
                    _("The JSON nests arrays and objects more than %(limit)s levels deep.") % {"limit": max_depth}
                )
        elif token in ("]", "}"):
            depth = max(depth - 1, 0)


def loads(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads`, after `check_depth`. Raises ValueError (json.JSONDecodeError or TooDeep)."""
    if isinstance(text, bytes | bytearray):
        text = text.decode("utf-8")
    check_depth(text, max_depth)
    return json.loads(text)


def jsonl_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number from 1, line) for each line of a JSON Lines text, split on "\\n" only;
    a trailing "\\r" is dropped and blank lines are skipped (their numbers still count)."""
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if line.strip():
            yield number, line

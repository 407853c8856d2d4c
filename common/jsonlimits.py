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
from collections.abc import Iterator
from typing import Any

import numpy as np
from django.utils.translation import gettext as _

MAX_DEPTH = 32  # arrays and objects inside one another; the deepest request body the API takes has 4

# +1 for an opening bracket, -1 for a closing one, 0 for any other byte of UTF-8 text.
_STEPS = np.zeros(256, dtype=np.int8)
_STEPS[list(b"[{")] = 1
_STEPS[list(b"]}")] = -1
_QUOTE = ord('"')


class TooDeep(ValueError):  # noqa: N818 - a ValueError by design: callers catch ValueError
    """The text nests arrays and objects deeper than allowed."""


def check_depth(text: str, max_depth: int = MAX_DEPTH) -> None:
    """TooDeep when arrays and objects nest deeper than `max_depth`; brackets inside strings do
    not count. The text need not be valid JSON: the decoder judges that afterwards, and on
    invalid text this only promises that the decoder, which stops at the first fault, never
    nests deeper than `max_depth`.

    Vectorised, because a Python loop over the brackets of the largest body the API reads
    (2.5 MB, DATA_UPLOAD_MAX_MEMORY_SIZE) took longer than decoding it: 12 MB of `[],` took
    1.9 s with a loop and takes about 0.1 s here (json.loads: 0.9 s)."""
    if text.count("[") + text.count("{") <= max_depth:
        return  # cannot nest deeper than it has brackets: the common case costs two counts
    if "\\" in text:
        # An escaped backslash, then an escaped quote: the quotes left delimit strings.
        text = text.replace("\\\\", "").replace('\\"', "")
    codes = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    steps = _STEPS[codes]
    if '"' in text:
        steps[np.logical_xor.accumulate(codes == _QUOTE)] = 0  # inside a string
    steps = steps[steps != 0]
    if steps.size and int(np.cumsum(steps, dtype=np.int32).max()) > max_depth:
        raise TooDeep(_("The JSON nests arrays and objects more than %(limit)s levels deep.") % {"limit": max_depth})


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

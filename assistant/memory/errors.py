"""What the memory service raises: each says what went wrong in words a person can act on."""

from __future__ import annotations


class MemoryUnavailable(RuntimeError):  # noqa: N818 (a state of the portal, not a fault)
    """Memory is off, or cannot work with the current settings; the message says why."""


class MemoryNotFound(LookupError):  # noqa: N818
    """No such memory for this user (it may be another user's: the same answer)."""


class MemoryAccessError(PermissionError):
    """A call without a signed-in user: refused before anything is read."""


class MemoryInputError(ValueError):
    """Text a memory cannot hold (empty, too long); the message says what to change."""

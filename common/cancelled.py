"""Work a person stopped: an answer whose client cancelled it, an ingestion run cancelled from
its page or the API. Not a fault: the work ends at its next step and what was done is kept."""

from __future__ import annotations


class Cancelled(Exception):  # noqa: N818 (a state, not a fault)
    pass

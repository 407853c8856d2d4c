"""Per-user rates over any 60 seconds (portal.limits), counted in the real Redis."""

from __future__ import annotations

import uuid

from portal import limits


def test_a_rate_counts_the_last_60_seconds_whatever_the_clock_minute(monkeypatch):
    monkeypatch.setattr(limits, "PREFIX", f"test:{uuid.uuid4().hex}")
    now = [1_000_070.0]  # ten seconds before a clock minute turns (1,000,080 = 60 × 16,668)
    monkeypatch.setattr(limits.time, "time", lambda: now[0])
    assert limits.allow("asks", 1, 3)
    assert limits.allow("asks", 1, 3, amount=2)
    now[0] += 20  # a new clock minute, but the same 60 seconds: still full
    assert not limits.allow("asks", 1, 3)
    assert limits.allow("asks", 2, 3)  # another user has a count of their own
    now[0] += 41  # the first three have left the window; the refused one has not
    assert limits.allow("asks", 1, 3)
    assert limits.allow("asks", 1, 3)
    assert not limits.allow("asks", 1, 3)
    now[0] += 61
    assert limits.allow("asks", 1, 3, amount=3)
    assert not limits.allow("asks", 1, 3)

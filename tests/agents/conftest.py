from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.stack import evidence_web


@pytest.fixture
def web(tmp_path) -> Iterator[int]:
    """daphne answering from the evidence alone (no chat model needed for an answer)."""
    with evidence_web(tmp_path / "daphne.log") as port:
        yield port

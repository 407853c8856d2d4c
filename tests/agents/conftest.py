from __future__ import annotations

from collections.abc import Iterator

import pytest

from portal.supervisor import web_command
from tests.stack import free_port, http_ok, process, wait_for


@pytest.fixture
def web(tmp_path) -> Iterator[int]:
    """daphne answering from the evidence alone (no chat model needed for an answer)."""
    port = free_port()
    log = tmp_path / "daphne.log"
    with process(web_command("127.0.0.1", port), log, PORTAL_ANSWER_MODE="evidence") as proc:
        wait_for(lambda: http_ok(f"http://127.0.0.1:{port}/healthz") or proc.poll() is not None, 60, "daphne", log)
        assert proc.poll() is None, log.read_text()
        yield port

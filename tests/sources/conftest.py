"""The test servers listen on 127.0.0.1, an address PORTAL_SOURCE_HOSTS must allow (a source
may not reach this machine by default): allowed here, for this process and the workers it
starts."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _loopback_sources_allowed(settings, monkeypatch):
    settings.SOURCE_HOSTS = ["127.0.0.1"]
    monkeypatch.setenv("PORTAL_SOURCE_HOSTS", "127.0.0.1")


@pytest.fixture
def roots(settings, tmp_path) -> Path:
    """PORTAL_SOURCE_ROOTS: one folder of the test's own, with an empty "handbook" in it."""
    root = tmp_path / "shares"
    (root / "handbook").mkdir(parents=True)
    settings.SOURCE_ROOTS = [str(root)]
    return root

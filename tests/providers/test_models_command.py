from __future__ import annotations

import dataclasses

import pytest
from django.core.management import CommandError, call_command

from providers import registry


@pytest.fixture
def roles(settings):
    registry.reset()
    yield settings.MODEL_ROLES
    registry.reset()


def test_it_checks_each_role_live(roles, capsys):
    call_command("models", role=["embedding", "ocr", "image_embedding", "chat"])
    out = capsys.readouterr().out
    assert "embedding        local" in out
    assert "dims 384" in out
    assert "HELLO 2026" in out.replace("'", "")
    assert "image_embedding  none" in out
    assert "off: no offline image embedding model" in out
    assert "said 'OK" in out


def test_it_fails_when_a_configured_role_fails(roles, settings, capsys):
    rerank = dataclasses.replace(
        roles["rerank"], provider="http", model="r", base_url="http://127.0.0.1:1/v1", timeout=1.0
    )
    settings.MODEL_ROLES = {**roles, "rerank": rerank}
    with pytest.raises(CommandError, match="Model roles failing: rerank"):
        call_command("models", role=["rerank", "embedding"])
    out = capsys.readouterr().out
    assert "FAILED: rerank model (http): cannot reach http://127.0.0.1:1/v1/rerank: check BASE_URL_RERANK" in out
    assert "dims 384" in out

"""Input /v1 must refuse in OpenAI's error shape, never with an HTML 500 or a stream left
open: every message checked before anything is asked (a NUL or a lone surrogate in an
earlier one), `kb-` ids of ASCII digits only, a body over DATA_UPLOAD_MAX_MEMORY_SIZE and a
path no route matches answered as JSON. Against a real daphne; the requests are sent as
JSON text, since the `openai` client cannot encode a lone surrogate."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from knowledge import actions

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("media")]
NOT_TEXT = ["a\x00b", "a\ud800b"]  # json.dumps writes the surrogate as \ud800, as a client may


def key_of(user) -> str:
    _token, key = actions.do_create_token(user, "openai client")
    return key


def post(port: int, key: str, path: str, body: Any) -> httpx.Response:
    return httpx.post(
        f"http://127.0.0.1:{port}{path}",
        content=body if isinstance(body, bytes) else json.dumps(body),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        timeout=60,
    )


def openai_error(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text[:300]
    assert response.headers["content-type"] == "application/json", response.text[:300]
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    return error


def test_every_message_is_checked_before_anything_is_asked_streamed_or_not(web, alice):
    key = key_of(alice)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Falcon 路由器的保修期是多久？"},
        {"role": "assistant", "content": [{"type": "text", "text": "两年。"}]},
        {"role": "user", "content": "Heron 交换机呢？"},
    ]
    for text in NOT_TEXT:
        for position in range(3):  # each earlier message, whoever wrote it
            changed = [dict(m) for m in messages]
            changed[position]["content"] = text if position != 2 else [{"type": "text", "text": text}]
            for stream in (False, True):
                response = post(
                    web, key, "/v1/chat/completions", {"model": "kb-all", "messages": changed, "stream": stream}
                )
                error = openai_error(response, 400)
                assert error["type"] == "invalid_request_error"
                assert "not text" in error["message"], error


def test_a_model_id_is_kb_and_ascii_digits_or_it_does_not_exist(web, alice):
    key = key_of(alice)
    for model in ["kb-²", "kb-①", "kb-١", "kb-+1", "kb- 1", "kb-03", "kb-0", "kb-" + "9" * 30]:
        response = post(
            web,
            key,
            "/v1/chat/completions",
            {"model": model, "messages": [{"role": "user", "content": "年假有几天？"}]},
        )
        error = openai_error(response, 404)
        assert error["code"] == "model_not_found", (model, error)


def test_a_body_over_the_upload_memory_limit_is_openais_json_400(web, alice):
    key = key_of(alice)
    body = {"model": "kb-all", "messages": [{"role": "user", "content": "x" * (3 * 1024 * 1024)}]}
    error = openai_error(post(web, key, "/v1/chat/completions", body), 400)
    assert "2.5\xa0MB" in error["message"]
    assert error["type"] == "invalid_request_error"


def test_a_path_no_route_matches_is_openais_json_404(web, alice):
    key = key_of(alice)
    for path in ("/v1/embeddings", "/v1/models/kb-all/"):
        assert openai_error(post(web, key, path, {}), 404)["code"] is None

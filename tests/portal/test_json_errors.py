"""Every error status under /api/ and /v1/ is JSON in the shape its clients read (DRF's
`{"detail": …}`, OpenAI's `{"error": {…}}`), whoever answered it: Django's own handlers (a
path no route matches, a body over DATA_UPLOAD_MAX_MEMORY_SIZE), a view's bodiless 416,
DRF's error page for a browser; its headers kept. Elsewhere the HTML pages stay."""

from __future__ import annotations

import json

import pytest

from tests.conftest import token_for

BIG = json.dumps({"name": "x", "model": "kb-all", "messages": [{"role": "user", "content": "x" * (3 * 1024 * 1024)}]})


def detail(response, status: int) -> str:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json"
    assert response["Content-Length"] == str(len(response.content))
    found = response.json()["detail"]
    assert isinstance(found, str)
    assert found
    return found


def openai_error(response, status: int) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    return error


def test_a_range_past_the_end_of_an_original_is_a_json_416_with_its_content_range(api, alice, private_collection):
    from ingestion import actions

    document, _run = actions.do_add_document(private_collection, "clip.txt", b"0123456789" * 4, enqueue=False)
    token_for(api, alice)
    response = api.get(f"/api/documents/{document.pk}/original/", HTTP_RANGE="bytes=40-")
    assert detail(response, 416) == "The range asked for starts past the end of the file."
    assert response["Content-Range"] == "bytes */40"
    assert response["Accept-Ranges"] == "bytes"


@pytest.mark.parametrize("url", ["/api/collections/", "/v1/chat/completions"])
def test_a_body_over_the_upload_memory_limit_is_json_under_both_prefixes(api, alice, url):
    token_for(api, alice)
    response = api.post(url, BIG, content_type="application/json")
    if url.startswith("/api/"):
        assert "2.5\xa0MB" in detail(response, 400)
    else:
        error = openai_error(response, 400)
        assert "2.5\xa0MB" in error["message"]
        assert error["type"] == "invalid_request_error"


def test_a_path_no_route_matches_is_json_under_both_prefixes_and_html_elsewhere(api, alice, client):
    token_for(api, alice)
    assert detail(api.get("/api/no-such-thing/"), 404) == "Not found."
    for path in ("/v1/embeddings", "/v1/models/kb-all/", "/v1"):
        error = openai_error(api.post(path, {}, format="json"), 404)
        assert (error["type"], error["code"]) == ("invalid_request_error", None)
    for path in ("/no-such-thing/", "/v1beta/models", "/apis/"):
        assert client.get(path)["Content-Type"].startswith("text/html"), path


def test_an_api_error_asked_for_as_html_keeps_drfs_detail_in_json(api, alice):
    token_for(api, alice)
    response = api.get("/api/collections/999999/", HTTP_ACCEPT="text/html")
    assert detail(response, 404)
    unauthenticated = api.__class__().get("/api/collections/", HTTP_ACCEPT="text/html")
    assert detail(unauthenticated, 401)
    assert unauthenticated["WWW-Authenticate"]


def test_an_error_the_view_answered_in_json_is_left_as_it_is(api, alice, private_collection):
    token_for(api, alice)
    response = api.post(f"/api/collections/{private_collection.pk}/documents/", {}, format="multipart")
    assert response.status_code == 400
    assert response.json() == {"detail": ["Send the files as multipart field “files”."]}


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)  # daphne sees the rows
def test_a_real_daphne_answers_the_416_in_json_too(media, live_web, api, alice, private_collection):
    import httpx

    from ingestion import actions

    document, _run = actions.do_add_document(private_collection, "clip.txt", b"0123456789" * 4, enqueue=False)
    key = token_for(api, alice)
    response = httpx.get(
        f"http://127.0.0.1:{live_web}/api/documents/{document.pk}/original/",
        headers={"Authorization": f"Token {key}", "Range": "bytes=40-"},
    )
    assert response.status_code == 416
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"detail": "The range asked for starts past the end of the file."}
    assert response.headers["content-range"] == "bytes */40"

"""Importing golden questions as JSON Lines, on the page and over the API, with input meant to
break it (issue 36): each bad line is reported with its number and reason and the good lines
are stored, in one transaction; a file that cannot be read at all is a 400 saying why, with
the same reason on the page and the API (quality.golden.read_import); nothing is a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import DatabaseError
from django.urls import reverse

from audit.models import Entry
from ingestion.actions import do_add_document
from knowledge.models import Document
from quality import actions
from quality.golden import MAX_IMPORT_BYTES
from quality.models import GoldenQuestion
from tests.conftest import token_for

pytestmark = pytest.mark.usefixtures("media")

DEEP = "[" * 100_000
TOO_DEEP = "The JSON nests arrays and objects more than 32 levels deep."
NOT_UTF8 = "The file is not UTF-8 text (byte 33 is not): save it as UTF-8 and import it again."
TOO_LARGE = "The file is larger than 5 MB: split it."


@pytest.fixture
def guide(private_collection) -> Document:
    document, _run = do_add_document(private_collection, "guide.md", b"# Guide\n\nSome text.", enqueue=False)
    Document.objects.filter(pk=document.pk).update(page_count=3)
    return document


@pytest.fixture
def api_url(api, alice, private_collection) -> str:
    token_for(api, alice)
    return reverse("collection-golden-import-api", args=[private_collection.pk])


@pytest.fixture
def page_url(client, alice, private_collection) -> str:
    client.force_login(alice)
    return reverse("collection-golden-import", args=[private_collection.pk])


def _line(*, ascii_only: bool = False, **fields: Any) -> str:
    entry = {"id": "a", "question": "What?", "lang": "en", "type": "fact", "gold": [{"file": "guide.md", "page": 1}]}
    return json.dumps({**entry, **fields}, ensure_ascii=ascii_only)


def _stored() -> list[str]:
    return list(GoldenQuestion.objects.order_by("key").values_list("key", flat=True))


def _messages(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def _upload(data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile("golden.jsonl", data, content_type="application/x-ndjson")


# Nesting


def test_a_line_nested_100000_deep_is_reported_over_the_api_and_the_line_before_stored(api, api_url, guide):
    body = f"{_line(id='first')}\n{DEEP}\n".encode()
    response = api.post(api_url, body, content_type="application/x-ndjson")
    assert response.status_code == 200, response.content[:300]
    assert response.json() == {"imported": 1, "updated": 0, "errors": [{"line": 2, "error": TOO_DEEP}]}
    assert _stored() == ["first"]


def test_a_line_nested_100000_deep_is_reported_on_the_page_and_the_line_before_stored(client, page_url, guide):
    response = client.post(page_url, {"file": _upload(f"{_line(id='first')}\n{DEEP}".encode())}, follow=True)
    assert response.status_code == 200
    assert _messages(response) == ["1 questions added, 0 updated.", f"Line 2: {TOO_DEEP}"]
    assert _stored() == ["first"]


def test_a_file_of_bad_lines_only_is_a_400_with_each_line(client, api, api_url, page_url, guide):
    data = f"{DEEP}\n\nnot json\n{_line(id='x', lang='fr')}".encode()
    response = api.post(api_url, data, content_type="application/x-ndjson")
    assert response.status_code == 400
    body = response.json()
    assert (body["imported"], body["updated"]) == (0, 0)
    assert [error["line"] for error in body["errors"]] == [1, 3, 4]  # the blank line 2 is no question
    assert body["errors"][0]["error"] == TOO_DEEP
    assert body["errors"][1]["error"].startswith("Not valid JSON (Expecting value at column 1")
    page = client.post(page_url, {"file": _upload(data)})
    assert page.status_code == 400
    assert f"Line 1: {TOO_DEEP}" in _messages(page)
    assert "Line 4: The language must be one of zh, en, not “fr”." in page.content.decode()
    assert _stored() == []


# Lines


def test_line_separators_inside_a_string_do_not_split_the_line(api, api_url, guide):
    question = "Where\u2028is\u0085it?"
    line = _line(id="separators", question=question, keys=["one\u2028two"])
    assert "\u2028" in line  # written as they are, not escaped
    assert "\u0085" in line
    response = api.post(api_url, f"{line}\r\n".encode(), content_type="application/x-ndjson")
    assert response.json() == {"imported": 1, "updated": 0, "errors": []}
    stored = GoldenQuestion.objects.get()
    assert (stored.question, stored.keys) == (question, ["one\u2028two"])
    again = api.post(api_url, _line(id="separators", question=question).encode(), content_type="text/plain")
    assert again.json() == {"imported": 0, "updated": 1, "errors": []}


def test_an_export_with_line_separators_imports_back_unchanged(api, api_url, alice, guide, private_collection):
    actions.do_add_golden(private_collection, alice, key="sep", question="A\u2028B\u0085C?", lang="en",
                          gold=[{"file": "guide.md", "page": 2}])  # fmt: skip
    exported = api.get(reverse("collection-golden-export-api", args=[private_collection.pk])).content
    assert exported.count(b"\n") == 1
    response = api.post(api_url, exported, content_type="application/x-ndjson")
    assert response.json() == {"imported": 0, "updated": 1, "errors": []}
    assert GoldenQuestion.objects.get().question == "A\u2028B\u0085C?"


def test_characters_postgresql_cannot_store_are_reported_not_a_500(api, api_url, guide):
    lines = [
        _line(id="nul", question="a\x00b"),  # json.dumps writes \\u0000
        _line(id="half", keys=["x\ud800y"], ascii_only=True),  # half of a surrogate pair: \\ud800
        '{"id": "long", "question": "What?", "lang": "en", "type": "fact", "gold": [{"file": "guide.md", "page": '
        + "1" * 5000
        + "}]}",
        _line(id="ok"),
    ]
    response = api.post(api_url, "\n".join(lines).encode(), content_type="application/x-ndjson")
    assert response.status_code == 200, response.content[:300]
    errors = {error["line"]: error["error"] for error in response.json()["errors"]}
    cannot = "The text holds a character that cannot be stored: a NUL (\\u0000) or half of a surrogate pair."
    assert errors == {1: cannot, 2: cannot, 3: "Not valid JSON: a value could not be read."}
    assert _stored() == ["ok"]


# The file as a whole


def test_a_file_that_is_not_utf8_is_a_400_on_the_page_and_the_api(client, api, api_url, page_url, guide):
    data = _line(id="latin", question="Café?").encode("latin-1")
    assert data.index("é".encode("latin-1")) == 32  # byte 33 counted from 1
    _refused_whole(client, api, api_url, page_url, data, NOT_UTF8)


def test_a_file_over_the_size_limit_is_a_400_on_the_page_and_the_api(client, api, api_url, page_url, guide):
    first = _line(id="first") + "\n"
    data = (first + " " * (MAX_IMPORT_BYTES + 1 - len(first))).encode()
    assert len(data) == MAX_IMPORT_BYTES + 1
    _refused_whole(client, api, api_url, page_url, data, TOO_LARGE)
    # One byte less is read.
    assert api.post(api_url, data[:-1], content_type="application/x-ndjson").status_code == 200
    assert _stored() == ["first"]


def test_an_empty_file_or_no_file_is_a_400_saying_so(client, api, api_url, page_url, guide):
    empty = api.post(api_url, b"\n \n", content_type="application/x-ndjson")
    assert empty.status_code == 400
    assert empty.json()["errors"] == [{"line": 0, "error": "The file holds no questions."}]
    missing = api.post(api_url, {}, format="multipart")
    assert missing.status_code == 400
    assert missing.json()["errors"] == [
        {"line": 0, "error": "Send the questions as the body or as multipart field “file”."}
    ]
    malformed = api.post(api_url, b"--nope\r\n", content_type="multipart/form-data")  # no boundary
    assert malformed.status_code == 400
    assert malformed.json()["errors"][0]["error"].startswith("Multipart form parse error")
    assert client.post(page_url, {}).status_code == 400


# One transaction


def test_an_unexpected_failure_stores_none_of_the_lines(monkeypatch, alice, private_collection, guide):
    """A good line is stored, then the database fails on the next: the first is not kept."""
    saved: list[str] = []
    save = GoldenQuestion.save

    def save_then_fail(self: GoldenQuestion, *args: Any, **kwargs: Any) -> None:
        if saved:
            raise DatabaseError("connection lost")
        save(self, *args, **kwargs)
        saved.append(self.key)

    monkeypatch.setattr(GoldenQuestion, "save", save_then_fail)
    text = "\n".join([_line(id="one"), _line(id="two"), _line(id="three")])
    with pytest.raises(DatabaseError):
        actions.do_import_golden(private_collection, alice, text)
    assert saved == ["one"]
    assert _stored() == []
    assert not Entry.objects.filter(action="golden.import").exists()


def _refused_whole(client, api, api_url: str, page_url: str, data: bytes, message: str) -> None:
    """The file is refused as a whole (line 0), the same way as a raw body, as a multipart
    file and on the page, and nothing is stored."""
    expected = {"imported": 0, "updated": 0, "errors": [{"line": 0, "error": message}]}
    as_body = api.post(api_url, data, content_type="application/x-ndjson")
    assert (as_body.status_code, as_body.json()) == (400, expected)
    as_file = api.post(api_url, {"file": _upload(data)}, format="multipart")
    assert (as_file.status_code, as_file.json()) == (400, expected)
    page = client.post(page_url, {"file": _upload(data)})
    assert page.status_code == 400
    assert _messages(page) == [message]
    assert _stored() == []

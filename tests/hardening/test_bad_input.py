"""The bad-input corpus (tests/files/bad, made by scripts/make_bad_files.py) through the REST
API and a real Celery worker: each file ends as its manifest says with a message a person can
read, the good file beside them is indexed, and what was stored before is untouched. Hostile
names and text are escaped on the pages; odd queries never make a server error."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from knowledge.models import Chunk, Document
from tests.conftest import token_for, wait_for
from tests.ingestion.test_documents_api import upload
from tests.ingestion.test_images_ocr import ingest

CORPUS = Path(__file__).resolve().parent.parent / "files" / "bad"
CASES: list[dict[str, str]] = json.loads((CORPUS / "cases.json").read_text(encoding="utf-8"))
XSS = "<img src=x onerror="
XSS_ESCAPED = "&lt;img src=x onerror="
GOOD = ("good.md", b"# Hotels\n\nHotels in Beijing are capped at 600 yuan a night.\n")
KEPT = ("kept.md", b"# Meals\n\nMeals are reimbursed up to 100 yuan a day.\n")
# What a readable message never holds: a traceback, a None, or where files live on the server.
UNREADABLE = re.compile(r"Traceback|\bNone\b|/tmp/|/work/|/var/|originals/|\.py\b|<_io\.|object at 0x")


pytestmark = pytest.mark.usefixtures("media")


def wait_done(api, document_ids: list[int], timeout: float) -> dict[int, dict[str, Any]]:
    done: dict[int, dict[str, Any]] = {}

    def all_ended() -> dict[int, dict[str, Any]] | None:
        for document_id in set(document_ids) - set(done):
            body = api.get(f"/api/documents/{document_id}/").json()
            if body["status"] in ("ready", "failed"):
                done[document_id] = body
        return done if len(done) == len(document_ids) else None

    return wait_for(all_ended, timeout, f"documents {sorted(document_ids)} ready or failed", every=1.0)


def assert_readable(message: str, case: str) -> None:
    assert message.strip(), f"{case}: empty message"
    assert not UNREADABLE.search(message), f"{case}: {message!r}"


def corpus_files() -> list[tuple[str, bytes]]:
    return [(case.get("upload_name", case["file"]), (CORPUS / case["file"]).read_bytes()) for case in CASES]


def test_the_corpus_has_at_least_30_cases_of_every_outcome():
    assert len(CASES) >= 30
    assert {case["expect"] for case in CASES} == {"refused", "failed", "ready"}
    assert all(case["error_contains"] for case in CASES if case["expect"] != "ready")
    on_disk = {path.name for path in CORPUS.iterdir()} - {"cases.json"}
    assert on_disk == {case["file"] for case in CASES}
    assert sum((CORPUS / name).stat().st_size for name in on_disk) < 2 * 1024 * 1024


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)  # the worker sees the rows
def test_every_bad_file_ends_as_expected_and_nothing_stored_is_lost(
    api, alice, private_collection, live_worker, settings
):
    settings.MAX_UPLOAD_MB = 1  # the file over the limit is made from the setting, not stored
    too_big = ("too_big.md", b"# Big\n\n" + b"x" * (1024 * 1024))
    token_for(api, alice)
    kept_id = upload(api, private_collection.pk, KEPT).json()[0]["document"]
    assert wait_done(api, [kept_id], 300)[kept_id]["status"] == "ready"
    kept_chunks = sorted(Chunk.objects.filter(document_id=kept_id).values_list("id", "text"))
    assert kept_chunks

    response = upload(api, private_collection.pk, *corpus_files(), too_big, GOOD)
    assert response.status_code == 201, response.content[:500]
    results = response.json()
    cases = [*CASES, {"file": "too_big.md", "expect": "refused", "error_contains": "1 MB upload limit"}]
    assert len(results) == len(cases) + 1
    *bad, good = results
    for case, result in zip(cases, bad, strict=True):
        if case["expect"] == "refused":
            assert result["document"] is None, case
            assert case["error_contains"] in result["error"], (case, result)
            assert_readable(result["error"], case["file"])
        else:
            assert result["document"], (case, result)
            assert not result["error"], (case, result)
    stored = {result["document"]: case for case, result in zip(cases, bad, strict=True) if result["document"]}
    done = wait_done(api, [*stored, good["document"]], 600)

    assert done[good["document"]]["status"] == "ready", done[good["document"]]
    for document_id, case in stored.items():
        body = done[document_id]
        assert body["status"] == case["expect"], (case, body["error"])
        if case["expect"] == "failed":
            assert case["error_contains"] in body["error"], (case, body["error"])
            assert_readable(body["error"], case["file"])
        else:
            name = case.get("stored_name") or case.get("upload_name") or case["file"]
            assert body["name"] == name, case
            assert Chunk.objects.filter(document_id=document_id).exists(), case
    assert sorted(Chunk.objects.filter(document_id=kept_id).values_list("id", "text")) == kept_chunks
    assert Document.objects.get(pk=kept_id).status == "ready"
    hits = api.post("/api/search/", {"query": "meals reimbursed", "rerank": False}, format="json").json()["hits"]
    assert kept_id in [hit["document_id"] for hit in hits]


def corpus(name: str) -> bytes:
    return (CORPUS / name).read_bytes()


def test_hostile_names_and_text_are_escaped_on_every_page(client, alice, private_collection):
    named = ingest(private_collection, "<img src=x onerror=alert(1)>.md", corpus("xss_name.md"))
    texted = ingest(private_collection, "xss_text.md", corpus("xss_text.md"))
    assert (named.status, texted.status) == ("ready", "ready")
    assert XSS in named.name
    client.force_login(alice)
    pages = {
        "collection": f"/collections/{private_collection.pk}/",
        "named document": f"/documents/{named.pk}/",
        "named page": f"/documents/{named.pk}/pages/1/",
        "text document": f"/documents/{texted.pk}/",
        "text page": f"/documents/{texted.pk}/pages/1/",
    }
    for what, url in pages.items():
        response = client.get(url)
        assert response.status_code == 200, what
        html = response.content.decode()
        assert XSS not in html, what
        assert "<script>alert(" not in html, what
        assert XSS_ESCAPED in html, what
    # A refused upload's message names the file: escaped where the page shows it.
    response = client.post(
        f"/collections/{private_collection.pk}/upload/",
        {"files": [SimpleUploadedFile("<img src=x onerror=alert(2)>.txt", corpus("binary.txt"))]},
        follow=True,
    )
    html = response.content.decode()
    assert "cannot be indexed" in html
    assert "<img src=x onerror=alert(2)>" not in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html


ODD_QUERIES = [
    "'; DROP TABLE knowledge_chunk; --",
    "1 OR 1=1; SELECT * FROM auth_user --",
    "\\x00 %s %(name)s {0} $1 ' \" ` ;",
    "酒店 🏨🚀 ✈️ hotels 👨‍👩‍👧",
    "ما هو حد الفندق؟ \u202ehotel\u202c cap",
    "  ",
]


def tables_exist() -> bool:
    users = get_user_model()._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT to_regclass('knowledge_chunk'), to_regclass('knowledge_document'), to_regclass(%s)", [users]
        )
        return all(cursor.fetchone())


def test_odd_search_queries_give_a_result_or_a_clear_400(api, alice, private_collection):
    ingest(private_collection, *KEPT)
    chunks = Chunk.objects.count()
    token_for(api, alice)
    for query in ODD_QUERIES:
        response = api.post("/api/search/", {"query": query, "rerank": False}, format="json")
        assert response.status_code in (200, 400), (query, response.content[:300])
        if response.status_code == 400:
            assert response.json()["query"], query
    reranked = api.post("/api/search/", {"query": ODD_QUERIES[0]}, format="json")
    assert reranked.status_code == 200
    for query, problem in (("x" * 100_000, "2000 characters"), ("hotel\u0000cap", "Null characters")):
        response = api.post("/api/search/", {"query": query}, format="json")
        assert response.status_code == 400
        assert problem in response.json()["query"][0]
    raw = api.post("/api/search/", data='{"query": "a\\u0000b"}', content_type="application/json")
    assert raw.status_code == 400
    broken = api.post("/api/search/", data='{"query": "unterminated', content_type="application/json")
    assert broken.status_code == 400
    assert "JSON parse error" in broken.json()["detail"]
    assert tables_exist()
    assert Chunk.objects.count() == chunks


def test_odd_questions_give_an_answer_or_a_clear_400(api, alice, private_collection, monkeypatch):
    import uuid

    monkeypatch.setattr("portal.limits.PREFIX", f"test:{uuid.uuid4().hex}")  # no count from elsewhere
    ingest(private_collection, *KEPT)
    chunks = Chunk.objects.count()
    token_for(api, alice)
    for question, problem in (("x" * 100_000, "2000 characters"), ("hotel\u0000cap", "Null characters")):
        response = api.post("/api/ask/", {"question": question}, format="json")
        assert response.status_code == 400
        assert problem in response.json()["question"][0]
    # One real answer by the local model for the SQL-looking, emoji and right-to-left text.
    question = "'; DROP TABLE knowledge_chunk; -- 酒店 🏨 ما هو حد الفندق؟ what is the meal limit?"
    response = api.post("/api/ask/", {"question": question, "collections": [private_collection.pk]}, format="json")
    assert response.status_code == 200, response.content[:500]
    body = response.json()
    assert body["error"] is None
    assert body["answer"]
    assert tables_exist()
    assert Chunk.objects.count() == chunks

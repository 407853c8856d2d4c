"""Uploading through the REST API, ingested by a real Celery worker, read back page by page."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge.models import Chunk, Document, Role
from tests.conftest import set_role, token_for, wait_for
from tests.ingestion.files import handbook_pdf

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("media")]


def upload(api, collection_id: int, *files: tuple[str, bytes]):
    payload = {"files": [SimpleUploadedFile(name, data) for name, data in files]}
    return api.post(f"/api/collections/{collection_id}/documents/", payload, format="multipart")


def wait_ready(api, document_id: int, timeout: float = 90) -> dict:
    def ended() -> dict | None:
        body = api.get(f"/api/documents/{document_id}/").json()
        return body if body["status"] in ("ready", "failed") else None

    return wait_for(ended, timeout, f"document {document_id} ready or failed", every=0.5)


@pytest.mark.stack
def test_it_uploads_and_indexes_through_a_real_worker(api, alice, private_collection, live_worker, tmp_path):
    token_for(api, alice)
    pdf = handbook_pdf(tmp_path / "h.pdf").read_bytes()
    response = upload(
        api,
        private_collection.pk,
        ("员工手册.pdf", pdf),
        ("说明.md", "# 说明\n\n正文。".encode()),
        ("blob.txt", bytes(range(256)) * 4),
    )
    assert response.status_code == 201
    results = {row["name"]: row for row in response.json()}
    assert "cannot be indexed" in results["blob.txt"]["error"]
    for name in ("员工手册.pdf", "说明.md"):
        body = wait_ready(api, results[name]["document"])
        assert body["status"] == "ready", body["error"]
    pdf_id = results["员工手册.pdf"]["document"]
    pages = api.get(f"/api/documents/{pdf_id}/pages/").json()["results"]
    assert [p["number"] for p in pages] == [1, 2]
    render = api.get(pages[0]["render_url"])
    assert render.status_code == 200
    assert b"".join(render.streaming_content).startswith(b"\x89PNG")
    original = api.get(f"/api/documents/{pdf_id}/original/")
    assert "%E5%91%98%E5%B7%A5%E6%89%8B%E5%86%8C.pdf" in original["Content-Disposition"]
    assert Chunk.objects.filter(document_id=pdf_id).count() == 6  # 4, and a picture chunk for each picture
    listed = api.get(f"/api/collections/{private_collection.pk}/documents/").json()["results"]
    assert sorted(d["name"] for d in listed) == ["员工手册.pdf", "说明.md"]


def test_it_lets_only_editors_upload_and_delete(api, alice, bob, team, team_collection):
    token_for(api, bob)
    assert upload(api, team_collection.pk, ("a.md", b"# A\n\ntext")).status_code == 403
    set_role(team, bob, Role.EDITOR)
    response = upload(api, team_collection.pk, ("a.md", b"# A\n\ntext"))
    assert response.status_code == 201
    document_id = response.json()[0]["document"]
    again = upload(api, team_collection.pk, ("a.md", b"# A\n\ntext")).json()[0]
    assert again["unchanged"] is True
    assert again["run"] is None
    set_role(team, bob, Role.VIEWER)
    assert api.delete(f"/api/documents/{document_id}/").status_code == 403
    set_role(team, bob, Role.EDITOR)
    assert api.delete(f"/api/documents/{document_id}/").status_code == 204
    assert not Document.objects.filter(pk=document_id).exists()


def test_it_refuses_everything_to_a_stranger(api, alice, charlie, private_collection):
    token_for(api, alice)
    document_id = upload(api, private_collection.pk, ("a.md", b"# A\n\ntext")).json()[0]["document"]
    token_for(api, charlie)
    assert upload(api, private_collection.pk, ("b.md", b"# B")).status_code == 404
    assert api.get(f"/api/collections/{private_collection.pk}/documents/").status_code == 404
    for path in ("", "pages/", "original/"):
        assert api.get(f"/api/documents/{document_id}/{path}").status_code == 404
    assert api.delete(f"/api/documents/{document_id}/").status_code == 404
    assert Document.objects.filter(pk=document_id).exists()


def test_it_says_what_to_send(api, alice, private_collection):
    token_for(api, alice)
    response = api.post(f"/api/collections/{private_collection.pk}/documents/", {}, format="multipart")
    assert response.status_code == 400
    assert "files" in str(response.json())


def test_a_file_over_the_size_limit_is_refused_and_the_others_go_on(api, alice, private_collection, settings):
    settings.MAX_UPLOAD_MB = 1
    token_for(api, alice)
    big = b"# Big\n\n" + b"x" * (1024 * 1024)
    response = upload(api, private_collection.pk, ("big.md", big), ("small.md", b"# Small\n\ntext"))
    assert response.status_code == 201
    refused, accepted = response.json()
    assert refused["document"] is None
    assert "1 MB upload limit" in refused["error"]
    assert accepted["error"] == "" or accepted.get("error") is None
    assert list(Document.objects.filter(collection=private_collection).values_list("rel_path", flat=True)) == [
        "small.md"
    ]


def test_hostile_and_long_names_are_stored_safely_with_their_extension(api, alice, private_collection):
    token_for(api, alice)
    long_name = "报告" * 150 + ".md"  # 303 characters
    names = [long_name, "../../etc/passwd.md", "bad\x1bna\x07me.md"]
    response = upload(api, private_collection.pk, *[(name, b"# Title\n\ntext") for name in names])
    assert response.status_code == 201, response.json()
    stored = sorted(Document.objects.filter(collection=private_collection), key=lambda d: len(d.name))
    by_name = {document.rel_path: document for document in stored}
    # Django's multipart parser already drops the folders of an uploaded name.
    assert set(by_name) == {"报告" * 98 + "报.md", "passwd.md", "badname.md"}
    longest = by_name["报告" * 98 + "报.md"]
    assert len(longest.name) == 200
    assert longest.mime == "text/markdown"  # the extension survived the cut
    for document in stored:
        assert ".." not in document.file.name
        assert document.file.name.startswith(f"collections/{private_collection.pk}/originals/")


@pytest.mark.parametrize(
    ("header", "status", "content_range", "body"),
    [
        ("bytes=0-9", 206, "bytes 0-9/40", b"0123456789"),
        ("bytes=30-", 206, "bytes 30-39/40", b"0123456789"),
        ("bytes=-5", 206, "bytes 35-39/40", b"56789"),
        ("bytes=35-100", 206, "bytes 35-39/40", b"56789"),
        # JSON, as every error under /api/ (portal.views.JsonErrors)
        ("bytes=40-", 416, "bytes */40", b'{"detail": "The range asked for starts past the end of the file."}'),
        ("bytes=0-1,5-6", 200, None, b"0123456789" * 4),  # several ranges: the whole file
        ("", 200, None, b"0123456789" * 4),
    ],
)
def test_an_original_is_served_in_byte_ranges_for_video_seeking(
    api, alice, private_collection, header, status, content_range, body
):
    from ingestion import actions

    document, _run = actions.do_add_document(private_collection, "clip.txt", b"0123456789" * 4, enqueue=False)
    token_for(api, alice)
    response = api.get(f"/api/documents/{document.pk}/original/", HTTP_RANGE=header)
    assert response.status_code == status
    assert response["Accept-Ranges"] == "bytes"
    assert response.get("Content-Range") == content_range
    content = b"".join(response.streaming_content) if response.streaming else response.content
    assert content == body


def test_uploads_are_limited_per_request_and_per_minute(api, alice, private_collection, settings, client, monkeypatch):
    import uuid

    from knowledge.models import Document

    monkeypatch.setattr("portal.limits.PREFIX", f"test:{uuid.uuid4().hex}")  # no count from elsewhere
    settings.UPLOAD_FILES_PER_MINUTE = 3
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 4
    token_for(api, alice)
    tag = uuid.uuid4().hex
    assert upload(api, private_collection.pk, *[(f"{tag}{n}.md", b"# a") for n in range(5)]).status_code == 400
    assert upload(api, private_collection.pk, (f"{tag}a.md", b"# a"), (f"{tag}b.md", b"# b")).status_code == 201
    refused = upload(api, private_collection.pk, (f"{tag}c.md", b"# c"), (f"{tag}d.md", b"# d"))
    assert refused.status_code == 429
    assert "Too many files uploaded this minute (at most 3 a minute)" in refused.json()["detail"]
    client.force_login(alice)  # the page shares the count
    page = client.post(
        f"/collections/{private_collection.pk}/upload/",
        {"files": [SimpleUploadedFile(f"{tag}e.md", b"# e")]},
        follow=True,
    )
    assert "Too many files uploaded this minute" in page.content.decode()
    assert sorted(Document.objects.filter(collection=private_collection).values_list("name", flat=True)) == [
        f"{tag}a.md",
        f"{tag}b.md",
    ]

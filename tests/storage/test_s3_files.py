"""Files in an S3-compatible store (PORTAL_STORAGE=s3), against moto's server with its
authentication enforced: an upload through the API lands in the bucket, is ingested from a
temporary copy, and its original (in byte ranges), render and picture are served from the
bucket; an object deleted behind the portal's back is a readable 404."""

from __future__ import annotations

import hashlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge.models import Document, Page, PageImage
from tests.conftest import token_for
from tests.ingestion.runs import add, drain, run_it
from tests.storage.s3 import new_bucket, text_pdf, use_s3

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]


@pytest.fixture
def bucket(s3_server, settings) -> str:
    name = new_bucket(s3_server)
    use_s3(settings, s3_server, name)
    return name


def keys(s3_server, bucket: str) -> set[str]:
    listed = s3_server.client().list_objects_v2(Bucket=bucket).get("Contents", [])
    return {item["Key"] for item in listed}


def test_an_upload_is_stored_ingested_and_served_from_the_bucket(
    api, alice, private_collection, s3_server, bucket, settings
):
    pdf = text_pdf()
    token_for(api, alice)
    response = api.post(
        f"/api/collections/{private_collection.pk}/documents/",
        {"files": [SimpleUploadedFile("travel.pdf", pdf)]},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    document = Document.objects.get(pk=response.json()[0]["document"])
    assert document.file.name in keys(s3_server, bucket)
    assert not settings.MEDIA_ROOT.exists()  # nothing on the local disk

    drain(private_collection)  # parsed from a temporary copy of the object
    document.refresh_from_db()
    assert document.status == Document.Status.READY, document.error
    assert document.page_count == 2

    ranged = api.get(f"/api/documents/{document.pk}/original/", HTTP_RANGE="bytes=100-163")
    assert ranged.status_code == 206
    assert ranged.content == pdf[100:164]
    assert ranged["Content-Range"] == f"bytes 100-163/{len(pdf)}"
    whole = api.get(f"/api/documents/{document.pk}/original/")
    assert whole.status_code == 200
    assert whole["Content-Length"] == str(len(pdf))
    assert b"".join(whole.streaming_content) == pdf

    page = Page.objects.get(document=document, number=1)
    render = api.get(f"/api/pages/{page.pk}/render/")  # drawn from the original on first view
    assert render.status_code == 200
    assert b"".join(render.streaming_content).startswith(b"\x89PNG")
    page.refresh_from_db()
    assert page.render.name in keys(s3_server, bucket)

    image = PageImage.objects.get(page=page)
    picture = api.get(f"/api/pages/{page.pk}/images/{image.sha256}/")
    assert picture.status_code == 200
    stored = s3_server.client().get_object(Bucket=bucket, Key=image.file.name)["Body"].read()
    assert b"".join(picture.streaming_content) == stored


def test_objects_deleted_behind_the_portals_back_are_readable_404s(api, alice, private_collection, s3_server, bucket):
    document, _run = add(private_collection, "travel.pdf", text_pdf())
    drain(private_collection)
    page = Page.objects.get(document=document, number=1)
    image = PageImage.objects.get(page=page)
    client = s3_server.client()
    client.delete_object(Bucket=bucket, Key=image.file.name)
    client.delete_object(Bucket=bucket, Key=document.file.name)
    token_for(api, alice)
    for url in (
        f"/api/documents/{document.pk}/original/",
        f"/api/pages/{page.pk}/render/",  # no render yet, and no original to draw it from
        f"/api/pages/{page.pk}/images/{image.sha256}/",
    ):
        for headers in ({}, {"HTTP_RANGE": "bytes=0-9"}):
            response = api.get(url, **headers)
            assert response.status_code == 404, url
            assert "missing" in response.json()["detail"], url


def test_ingesting_a_missing_original_fails_the_document_readably(private_collection, s3_server, bucket):
    from tests.ingestion.runs import CountingEmbedder

    document, run = add(private_collection, "notes.md", b"# Notes\n\nSome text.")
    s3_server.client().delete_object(Bucket=bucket, Key=document.file.name)
    run_it(run, CountingEmbedder())
    document.refresh_from_db()
    assert document.status == Document.Status.FAILED
    assert "stored file of this document is missing" in document.error


def test_two_documents_with_the_same_content_keep_their_own_objects(private_collection, s3_server, bucket):
    """No overwriting: deleting one document leaves the other's original in the bucket."""
    from knowledge import actions

    first, _ = add(private_collection, "a.md", b"# Same\n\ntext")
    second, _ = add(private_collection, "b.md", b"# Same\n\ntext")
    assert first.file.name != second.file.name
    actions.do_delete_document(first)
    assert second.file.name in keys(s3_server, bucket)
    assert hashlib.sha256(second.file.storage.open(second.file.name).read()).hexdigest() == second.sha256

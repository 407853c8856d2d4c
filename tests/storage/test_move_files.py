"""`manage.py move_files`: every stored file copied to the configured backend and back,
verified by SHA-256, resumable (a second run copies nothing, a damaged copy is redone)."""

from __future__ import annotations

import hashlib
import io
import shutil

import pytest
from django.core.management import CommandError, call_command

from knowledge.models import Document, Page, PageImage
from knowledge.renders import ensure_render
from tests.ingestion.files import ingest
from tests.storage.s3 import new_bucket, text_pdf, use_local, use_s3

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]


def move(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("move_files", *args, stdout=out, stderr=err)
    except CommandError as exc:
        raise CommandError(f"{exc}\n{err.getvalue()}") from None
    return out.getvalue()


def stored_files() -> dict[str, str]:
    """name -> SHA-256 of every stored file, read from the local disk (MEDIA_ROOT)."""
    from django.conf import settings

    names = [d.file.name for d in Document.objects.all()]
    names += [p.render.name for p in Page.objects.exclude(render="").exclude(render=None)]
    names += [i.file.name for i in PageImage.objects.all()]
    return {name: hashlib.sha256((settings.MEDIA_ROOT / name).read_bytes()).hexdigest() for name in names}


def bucket_files(s3_server, bucket: str) -> dict[str, str]:
    client = s3_server.client()
    listed = client.list_objects_v2(Bucket=bucket).get("Contents", [])
    return {
        item["Key"]: hashlib.sha256(client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()).hexdigest()
        for item in listed
    }


def test_files_move_to_the_bucket_and_back(private_collection, s3_server, settings):
    document = ingest(private_collection, "travel.pdf", text_pdf())
    assert ensure_render(Page.objects.get(document=document, number=2))
    before = stored_files()
    assert len(before) == 3  # the original, a render, a picture

    bucket = new_bucket(s3_server)
    use_s3(settings, s3_server, bucket)
    assert "Copied 3, already there 0" in move("--to", "s3")
    assert bucket_files(s3_server, bucket) == before
    assert "Copied 0, already there 3" in move("--to", "s3")  # resumable: nothing twice

    damaged = next(iter(before))  # a copy that differs (an interrupted upload) is redone
    s3_server.client().put_object(Bucket=bucket, Key=damaged, Body=b"half a file")
    assert "Copied 1, already there 2" in move("--to", "s3")
    assert bucket_files(s3_server, bucket) == before

    use_local(settings)
    shutil.rmtree(settings.MEDIA_ROOT)
    report = move("--to", "local", "--delete-source")
    assert "Copied 3, already there 0" in report
    assert "deleted at the source 3" in report
    assert stored_files() == before
    assert bucket_files(s3_server, bucket) == {}


def test_it_refuses_to_move_into_the_backend_not_configured(settings):
    with pytest.raises(CommandError, match="PORTAL_STORAGE"):
        move("--to", "s3")


def test_moving_out_of_the_bucket_needs_its_settings(settings):
    settings.S3_STORAGE_OPTIONS = {}
    with pytest.raises(CommandError, match="PORTAL_S3_BUCKET"):
        move("--to", "local")

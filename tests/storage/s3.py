"""Switching a test's settings to an S3 bucket, as PORTAL_STORAGE=s3 would."""

from __future__ import annotations

import uuid
from typing import Any

from common.storage import s3_options
from tests.sources.servers import S3Server


def new_bucket(server: S3Server) -> str:
    name = f"portal-files-{uuid.uuid4().hex[:12]}"
    server.make_bucket(name)
    return name


def use_s3(
    settings: Any,
    server: S3Server,
    bucket: str,
    *,
    endpoint_url: str | None = None,
    secret_key: str | None = None,
) -> None:
    """settings.STORAGES' default backend made the bucket, with the options the settings
    module builds from PORTAL_S3_*. Changing STORAGES resets Django's cached default_storage
    (django.test.signals.storages_changed), and the pytest-django `settings` fixture puts it
    back after the test."""
    options = s3_options(
        endpoint_url=endpoint_url or server.endpoint_url,
        bucket=bucket,
        region=server.region,
        access_key=server.access_key,
        secret_key=secret_key or server.secret_key,
        timeout=2,
    )
    settings.STORAGE_KIND = "s3"
    settings.S3_STORAGE_OPTIONS = options
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options},
    }


def use_local(settings: Any) -> None:
    """Back to the local file system (MEDIA_ROOT), keeping S3_STORAGE_OPTIONS as an operator
    keeps PORTAL_S3_* set to move files out of the store."""
    settings.STORAGE_KIND = "local"
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    }


def text_pdf(pages: int = 2) -> bytes:
    """A text PDF with a picture on its first page (kept as a PageImage)."""
    import pymupdf

    from tests.ingestion.files import png

    document = pymupdf.open()
    for number in range(1, pages + 1):
        page = document.new_page()
        page.insert_text((72, 72), f"Chapter {number}", fontsize=18)
        page.insert_text((72, 110), f"Travel costs are refunded within {number * 10} days of the trip.", fontsize=11)
        if number == 1:
            page.insert_image(pymupdf.Rect(72, 150, 372, 350), stream=png(300, 200))
    data: bytes = document.tobytes()
    document.close()
    return data

"""Office files are zips: bombs and broken archives are refused before a library unpacks them,
through the parsers and through the pipeline, with nothing stored lost."""

from __future__ import annotations

import os
import zipfile

import pytest

from ingestion.parsers.base import ParseError
from ingestion.parsers.formats import parser_for
from ingestion.sniff import DOCX, XLSX

PARTS = {"[Content_Types].xml": "<Types/>", "word/document.xml": "<w:document/>"}


def office_zip(path, extra: dict[str, bytes]):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, text in PARTS.items():
            archive.writestr(name, text)
        for name, data in extra.items():
            archive.writestr(name, data)
    return path


def test_a_zip_bomb_is_refused_by_its_compression_ratio(tmp_path):
    path = office_zip(tmp_path / "bomb.docx", {"word/media/zeros.bin": b"\0" * (20 * 1024 * 1024)})
    assert path.stat().st_size < 100_000  # 20 MB of zeros in a few tens of KB
    with pytest.raises(ParseError, match="zip bomb"):
        list(parser_for(DOCX).pages(path))


def test_an_archive_that_unpacks_beyond_the_limit_is_refused(tmp_path, settings):
    settings.MAX_UNZIPPED_MB = 1
    path = office_zip(tmp_path / "big.docx", {"word/media/noise.bin": os.urandom(2 * 1024 * 1024)})
    with pytest.raises(ParseError, match="PORTAL_MAX_UNZIPPED_MB"):
        list(parser_for(DOCX).pages(path))


def test_a_workbook_missing_its_workbook_part_names_it(tmp_path):
    path = tmp_path / "broken.xlsx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
    with pytest.raises(ParseError, match=r"xl/workbook\.xml"):
        list(parser_for(XLSX).pages(path))


@pytest.mark.django_db
def test_a_bomb_fails_its_own_run_and_keeps_what_was_stored(private_collection, settings, tmp_path):
    from common.runs import claim
    from ingestion import actions
    from ingestion.models import IngestionRun
    from ingestion.pipeline import ingest_document
    from knowledge.models import Document
    from providers import registry

    settings.MEDIA_ROOT = tmp_path / "media"
    good, run = actions.do_add_document(private_collection, "notes.md", b"# Notes\n\nkept", enqueue=False)
    assert run is not None
    assert claim(run)
    ingest_document(run, registry.text_embedder())
    bomb = office_zip(tmp_path / "bomb.docx", {"word/media/zeros.bin": b"\0" * (20 * 1024 * 1024)})
    document, run = actions.do_add_document(private_collection, "bomb.docx", bomb.read_bytes(), enqueue=False)
    assert run is not None
    assert claim(run)
    ingest_document(run, registry.text_embedder())
    run.refresh_from_db()
    document.refresh_from_db()
    assert run.status == IngestionRun.Status.FAILED
    assert "zip bomb" in run.error
    assert document.status == Document.Status.FAILED
    good.refresh_from_db()
    assert good.status == Document.Status.READY

"""A file whose content is not the format its extension announces is refused, naming what it
holds ("“lie.pdf” is named .pdf but holds an HTML page."): through the API (400, nothing
stored), the upload page, a source's sync and a folder sync (the file skipped with the reason,
a stored version kept). Text of any kind under a text name, names without an extension and
extensions the portal does not know are left to the content, as before."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pymupdf
import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from audit.models import Action, Entry
from common.runs import claim
from ingestion.actions import do_add_document
from ingestion.sniff import DOCX, MOV, MP4, PDF, TEXT, name_mismatch, sniff_bytes
from knowledge.models import Document
from sources.actions import do_folder_source, do_save_source
from sources.models import Source, SyncRun
from sources.sync import execute
from tests.conftest import token_for
from tests.ingestion.files import png
from tests.ingestion.office_files import handbook_docx, jpeg
from tests.ingestion.test_documents_api import upload

pytestmark = pytest.mark.usefixtures("media")

BAD = Path(__file__).resolve().parent.parent / "files" / "bad"
HTML = b"<!DOCTYPE html>\n<html><head><title>Login</title></head><body><form></form></body></html>\n"
ELF = b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8
TEXT_BYTES = "# Notes\n\nPlain notes about travel, 差旅.\n".encode()


def pdf_bytes(text: str = "Refunds take 14 days.") -> bytes:
    document = pymupdf.open()
    document.new_page().insert_text((72, 100), text, fontsize=12)
    return bytes(document.tobytes())


def zip_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("notes.txt", "just text")
    return buffer.getvalue()


@pytest.fixture
def docx_bytes(tmp_path) -> bytes:
    return handbook_docx(tmp_path / "handbook.docx").read_bytes()


REFUSED = [
    ("lie.pdf", lambda: HTML, "“lie.pdf” is named .pdf but holds an HTML page."),
    ("notes.pdf", lambda: TEXT_BYTES, "“notes.pdf” is named .pdf but holds plain text."),
    ("bundle.pdf", zip_bytes, "“bundle.pdf” is named .pdf but holds a zip archive."),
    ("tool.pdf", lambda: ELF, "“tool.pdf” is named .pdf but holds a Linux program (ELF)."),
    ("elf.docx", lambda: ELF, "“elf.docx” is named .docx but holds a Linux program (ELF)."),
    ("notes.docx", lambda: TEXT_BYTES, "“notes.docx” is named .docx but holds plain text."),
    ("old.docx", lambda: b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(512), "holds an older Office file (.doc, .xls"),
    ("budget.xlsx", pdf_bytes, "“budget.xlsx” is named .xlsx but holds a PDF document."),
    ("photo.png", pdf_bytes, "“photo.png” is named .png but holds a PDF document."),
    ("Photo.JPG", lambda: HTML, "“Photo.JPG” is named .jpg but holds an HTML page."),
    ("clip.mp4", lambda: png(40, 30), "“clip.mp4” is named .mp4 but holds a PNG image."),
    ("clip.webm", lambda: TEXT_BYTES, "“clip.webm” is named .webm but holds plain text."),
    ("report.txt", pdf_bytes, "“report.txt” is named .txt but holds a PDF document."),
    ("notes.md", lambda: ELF, "“notes.md” is named .md but holds a Linux program (ELF)."),
]


@pytest.mark.parametrize(("name", "make", "message"), REFUSED, ids=[case[0] for case in REFUSED])
def test_it_refuses_a_file_whose_content_is_not_its_extensions_format(
    api, alice, private_collection, name, make, message
):
    token_for(api, alice)
    response = upload(api, private_collection.pk, (name, make()))
    assert response.status_code == 400, response.json()
    [result] = response.json()
    assert message in result["error"]
    assert result["document"] is None
    assert not Document.objects.exists()
    assert not Entry.objects.filter(action=Action.DOCUMENT_UPLOAD).exists()


def test_a_deck_named_as_a_word_document_is_refused(api, alice, private_collection, tmp_path, docx_bytes):
    token_for(api, alice)
    [result] = upload(api, private_collection.pk, ("deck.pptx", docx_bytes)).json()
    assert result["error"] == "“deck.pptx” is named .pptx but holds a Word document."


def test_it_keeps_the_good_files_of_the_same_upload(api, alice, private_collection):
    token_for(api, alice)
    response = upload(api, private_collection.pk, ("lie.pdf", HTML), ("policy.pdf", pdf_bytes()))
    assert response.status_code == 201
    refused, stored = response.json()
    assert refused["error"] == "“lie.pdf” is named .pdf but holds an HTML page."
    assert stored["error"] == ""
    assert list(Document.objects.values_list("rel_path", "mime")) == [("policy.pdf", PDF)]


ACCEPTED = [
    ("notes.txt", lambda: TEXT_BYTES, TEXT),
    ("server.log", lambda: b"2026-12-04 10:00 started\n2026-12-04 10:01 ready\n", TEXT),
    ("table.csv", lambda: b"name,city\nAlice,Beijing\n", "text/csv"),
    ("notes.md", lambda: HTML, "text/markdown"),  # Markdown may hold HTML
    ("page.html", lambda: HTML, TEXT),
    ("page.htm", lambda: HTML, TEXT),
    ("README", pdf_bytes, PDF),  # no extension: the content decides
    ("export.dat", pdf_bytes, PDF),  # an extension the portal does not know
    ("REPORT.PDF", pdf_bytes, PDF),
    # A picture under another picture's extension, a video under another container's: common
    # (the public evaluation's photo-22.jpg is a PNG) and harmless, every viewer opens them.
    ("photo.jpg", lambda: png(40, 30), "image/png"),
    ("photo.png", lambda: jpeg(40, 30), "image/jpeg"),
    ("talk.mov", lambda: (BAD / "silent.mp4").read_bytes(), MP4),
    ("talk.webm", lambda: (BAD / "silent.mp4").read_bytes(), MP4),
    ("talk.srt", lambda: b"1\n00:00:01,000 --> 00:00:02,000\nHello\n", "application/x-subrip"),
    ("talk.srt.txt", lambda: b"1\n00:00:01,000 --> 00:00:02,000\nHello\n", "application/x-subrip"),
]


@pytest.mark.parametrize(("name", "make", "mime"), ACCEPTED, ids=[case[0] for case in ACCEPTED])
def test_it_takes_content_that_suits_its_name(api, alice, private_collection, name, make, mime):
    token_for(api, alice)
    response = upload(api, private_collection.pk, (name, make()))
    assert response.status_code == 201, response.json()
    assert Document.objects.get().mime == mime


def test_the_upload_page_shows_why_and_stores_nothing(client, alice, private_collection):
    client.force_login(alice)
    files = [SimpleUploadedFile("lie.pdf", HTML), SimpleUploadedFile("good.md", TEXT_BYTES)]
    page = client.post(reverse("collection-upload", args=[private_collection.pk]), {"files": files}, follow=True)
    assert "“lie.pdf” is named .pdf but holds an HTML page." in page.content.decode()
    assert list(Document.objects.values_list("rel_path", flat=True)) == ["good.md"]


def test_a_new_version_that_is_not_its_format_keeps_the_stored_one(private_collection):
    document, _run = do_add_document(private_collection, "policy.pdf", pdf_bytes(), enqueue=False)
    with pytest.raises(ValidationError, match=r"is named \.pdf but holds an HTML page"):
        do_add_document(private_collection, "policy.pdf", HTML, enqueue=False)
    kept = Document.objects.get()
    assert (kept.pk, kept.sha256, kept.mime) == (document.pk, document.sha256, PDF)


def test_a_source_sync_skips_the_file_with_the_reason(private_collection, settings, tmp_path):
    root = tmp_path / "shares"
    folder = root / "handbook"
    folder.mkdir(parents=True)
    settings.SOURCE_ROOTS, settings.SOURCE_WORKDIR = [str(root)], tmp_path / "work"
    (folder / "lie.pdf").write_bytes(HTML)
    (folder / "elf.docx").write_bytes(ELF)
    (folder / "good.md").write_bytes(TEXT_BYTES)
    source = do_save_source(Source(collection=private_collection, name="Share", kind="folder", url=str(folder)))
    run = SyncRun.objects.create(source=source)
    assert claim(run)
    run = execute(run, inline=True)
    assert run.status == SyncRun.Status.SUCCEEDED, run.error
    assert {failure["path"]: failure["error"] for failure in run.failures} == {
        "lie.pdf": "“lie.pdf” is named .pdf but holds an HTML page.",
        "elf.docx": "“elf.docx” is named .docx but holds a Linux program (ELF).",
    }
    assert (run.counts["added"], run.counts["failed"]) == (1, 2)
    assert list(Document.objects.values_list("rel_path", flat=True)) == ["good.md"]


def test_a_folder_sync_skips_the_file_and_keeps_what_was_stored_for_it(private_collection, tmp_path, settings):
    folder = tmp_path / "folder"
    folder.mkdir()
    settings.SOURCE_ROOTS, settings.SOURCE_WORKDIR = [str(folder)], tmp_path / "work"
    source = do_folder_source(private_collection, str(folder))
    (folder / "policy.pdf").write_bytes(pdf_bytes())
    assert sync_once(source).counts["added"] == 1
    before = Document.objects.get()
    (folder / "policy.pdf").write_bytes(HTML)  # replaced by a saved login page
    run = sync_once(source)
    assert run.failures == [{"path": "policy.pdf", "error": "“policy.pdf” is named .pdf but holds an HTML page."}]
    assert list(Document.objects.values_list("pk", "sha256")) == [(before.pk, before.sha256)]


def sync_once(source: Source) -> SyncRun:
    """One sync of the source, its files queued for the workers."""
    run = SyncRun.objects.create(source=source)
    assert claim(run)
    return execute(run)


def test_the_check_reads_only_the_name_and_the_start_of_the_content():
    data = b"<html><body>" + b"x" * 100_000
    handle = io.BytesIO(data)
    handle.seek(500)
    assert name_mismatch(handle, sniff_bytes(data, "a.pdf"), "folder/a.pdf") == (
        "“a.pdf” is named .pdf but holds an HTML page."
    )
    assert handle.tell() == 0  # left at the start, for the copy that follows
    assert name_mismatch(io.BytesIO(b""), DOCX, "a.docx") is None
    assert name_mismatch(io.BytesIO(b""), MOV, "a.mp4") is None
    # Bytes that are no text and no format the portal knows, under a text name: the content
    # check says it cannot be read (a text encoding nobody can tell is not a "wrong name").
    assert name_mismatch(io.BytesIO(bytes(range(256))), "application/octet-stream", "data.txt") is None

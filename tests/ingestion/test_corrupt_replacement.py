"""A damaged new version of a stored document is refused (issue 4, Bad input: nothing stored is
lost): by the REST upload, the upload page and the folder sync, the document, its file and its
chunks stay as they were and searchable. A damaged new document is stored and its run fails,
as before. Real files, PostgreSQL + pgvector and the local embedder."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from assistant.retrieval.search import search
from ingestion.models import IngestionRun
from knowledge.models import Chunk, Collection, Document, IndexedDocument
from tests.conftest import token_for
from tests.ingestion.image_files import photo_jpeg
from tests.ingestion.runs import CountingEmbedder, add, run_it

BAD = Path(__file__).resolve().parent.parent / "files" / "bad"
SENTENCE = "Hotels in Beijing are capped at 600 yuan a night."
KEPT = "The version stored before is kept."


pytestmark = pytest.mark.usefixtures("media")


def policy_pdf(path: Path, sentence: str = SENTENCE) -> bytes:
    import pymupdf

    document = pymupdf.open()
    document.new_page().insert_text((72, 100), sentence, fontsize=12)
    document.save(path)
    return path.read_bytes()


def stored(collection: Collection, name: str, data: bytes) -> Document:
    document, run = add(collection, name, data)
    run_it(run, CountingEmbedder())
    document.refresh_from_db()
    assert document.status == Document.Status.READY
    return document


def snapshot(document: Document) -> tuple[object, ...]:
    document.refresh_from_db()
    with document.file.open("rb") as handle:
        data = handle.read()
    chunks = sorted(Chunk.objects.filter(document=document).values_list("pk", flat=True))
    return document.status, document.sha256, document.file.name, data, chunks


def assert_kept(user, document: Document, before: tuple[object, ...]) -> None:
    assert snapshot(document) == before
    assert IndexedDocument.objects.filter(document=document, sha256=document.sha256).exists()
    assert not IngestionRun.objects.filter(document=document, status=IngestionRun.Status.QUEUED).exists()
    hits = search(user, "Beijing hotel cap per night", collection_ids=[document.collection_id], rerank=False).hits
    assert hits
    assert hits[0].document_id == document.pk


@pytest.mark.django_db
def test_the_api_refuses_a_damaged_new_version_and_keeps_the_stored_one(
    api, alice, private_collection, tmp_path, settings
):
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 0  # uploads on disk, as large ones are: checked where they lie
    document = stored(private_collection, "policy.pdf", policy_pdf(tmp_path / "policy.pdf"))
    before = snapshot(document)
    token_for(api, alice)
    damaged = (BAD / "truncated.pdf").read_bytes()
    response = api.post(
        f"/api/collections/{private_collection.pk}/documents/",
        {"files": [SimpleUploadedFile("policy.pdf", damaged), SimpleUploadedFile("other.pdf", damaged)]},
        format="multipart",
    )
    assert response.status_code == 201  # the new file was stored
    replaced, new = response.json()
    assert (replaced["document"], replaced["run"]) == (None, None)
    assert replaced["error"].startswith("“policy.pdf” was not stored: The PDF cannot be opened: it is damaged")
    assert replaced["error"].endswith(KEPT)
    assert "/tmp" not in replaced["error"]  # nor the checked copy's path
    assert_kept(alice, document, before)

    # A new document is stored as it is; its run says why it fails (as before).
    other = Document.objects.get(pk=new["document"])
    assert (new["error"], other.rel_path) == ("", "other.pdf")
    run = IngestionRun.objects.get(pk=new["run"])
    assert run_it(run, CountingEmbedder()) is None
    run.refresh_from_db()
    assert run.status == IngestionRun.Status.FAILED
    assert "The PDF cannot be opened" in run.error

    # A good new version is taken, read from where the upload lies.
    changed = SimpleUploadedFile("policy.pdf", policy_pdf(tmp_path / "changed.pdf", SENTENCE.replace("600", "800")))
    response = api.post(
        f"/api/collections/{private_collection.pk}/documents/", {"files": [changed]}, format="multipart"
    )
    assert response.status_code == 201
    assert response.json()[0]["document"] == document.pk
    assert response.json()[0]["run"] is not None


@pytest.mark.django_db
def test_the_upload_page_refuses_a_damaged_new_version_and_keeps_the_stored_one(
    client, alice, private_collection, tmp_path
):
    document = stored(private_collection, "photo.jpg", photo_jpeg())
    before = snapshot(document)
    client.force_login(alice)
    damaged = SimpleUploadedFile("photo.jpg", (BAD / "truncated.jpg").read_bytes())
    page = client.post(reverse("collection-upload", args=[private_collection.pk]), {"files": [damaged]}, follow=True)
    text = page.content.decode()
    assert "“photo.jpg” was not stored: The image cannot be read: it is damaged or incomplete" in text
    assert KEPT in text
    assert "indexing has started" not in text
    assert snapshot(document) == before
    assert IndexedDocument.objects.filter(document=document, sha256=document.sha256).exists()


@pytest.mark.django_db
def test_a_folder_sync_keeps_documents_whose_changed_files_are_now_damaged(
    alice, private_collection, tmp_path, capsys, settings
):
    settings.SOURCE_ROOTS = [str(tmp_path)]
    folder = tmp_path / "docs"
    folder.mkdir()
    policy_pdf(folder / "policy.pdf")
    (folder / "clip.mp4").write_bytes((BAD / "silent.mp4").read_bytes())
    (folder / "notes.md").write_text("# Notes\n\nMeals are not reimbursed.", encoding="utf-8")
    call_command("ingest", str(folder), collection=private_collection.pk, inline=True)
    assert "3 listed, 3 added, 0 changed, 0 unchanged, 0 renamed, 0 deleted, 0 failed" in capsys.readouterr().out
    documents = {document.rel_path: document for document in Document.objects.filter(collection=private_collection)}
    assert {document.status for document in documents.values()} == {Document.Status.READY}
    before = {name: snapshot(document) for name, document in documents.items()}

    (folder / "policy.pdf").write_bytes((BAD / "truncated.pdf").read_bytes())
    (folder / "clip.mp4").write_bytes((BAD / "truncated.mp4").read_bytes())
    (folder / "notes.md").write_text("# Notes\n\nMeals are reimbursed up to 100 yuan.", encoding="utf-8")
    call_command("ingest", str(folder), collection=private_collection.pk, inline=True)
    output = capsys.readouterr()
    assert "3 listed, 0 added, 1 changed, 0 unchanged, 0 renamed, 0 deleted, 2 failed" in output.out
    assert "skipped policy.pdf: “policy.pdf” was not stored: The PDF cannot be opened" in output.err
    assert "skipped clip.mp4: “clip.mp4” was not stored: The video cannot be read" in output.err
    assert output.err.count(KEPT) == 2
    assert_kept(alice, documents["policy.pdf"], before["policy.pdf"])
    assert snapshot(documents["clip.mp4"]) == before["clip.mp4"]
    assert "100 yuan" in Chunk.objects.get(document=documents["notes.md"]).text  # the good change went in

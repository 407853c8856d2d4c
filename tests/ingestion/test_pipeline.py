"""The pipeline on real PostgreSQL + pgvector with the local embedder: pages, chunks and
locations; identical files do no work; one changed page is the only one re-embedded."""

from __future__ import annotations

import io

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from ingestion import actions
from ingestion.models import IngestionRun
from knowledge.models import Chunk, Document, IndexedDocument, IndexedPage, PageImage
from knowledge.renders import ensure_render
from tests.ingestion import media_files
from tests.ingestion.files import POLICY, ZERO_PAGE_PDF, handbook_pdf
from tests.ingestion.image_files import photo_jpeg
from tests.ingestion.runs import CountingEmbedder, add, kept_statistics, recounted, run_it

pytestmark = pytest.mark.usefixtures("media")


def ten_pages(path, changed: int | None = None):
    import pymupdf

    document = pymupdf.open()
    for number in range(1, 11):
        page = document.new_page()
        text = (
            f"Section {number}. "
            + ("Revised wording of this page. " if number == changed else "")
            + f"Policy paragraph number {number} explains travel rules for case {number}. " * 4
        )
        page.insert_textbox(pymupdf.Rect(72, 72, 520, 700), text, fontsize=11)
    document.save(path)
    return path


def test_it_indexes_a_pdf_page_by_page(db, private_collection, embedder, tmp_path):
    data = handbook_pdf(tmp_path / "h.pdf").read_bytes()
    document, run = add(private_collection, "手册/handbook.pdf", data)
    result = run_it(run, embedder)
    assert result is not None
    assert result.pages == 2
    assert result.pages_indexed == 2
    document.refresh_from_db()
    assert (document.status, document.page_count, document.name, document.mime) == (
        "ready",
        2,
        "handbook.pdf",
        "application/pdf",
    )
    private_collection.refresh_from_db()
    version = private_collection.active_version
    assert version is not None
    assert version.dims == 384
    with connection.cursor() as cursor:  # its own partial HNSW index, on the cast embedding
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [f"chunk_hnsw_v{version.pk}"])
        (definition,) = cursor.fetchone()
    assert "hnsw" in definition
    assert "vector(384)" in definition
    assert f"index_version_id = {version.pk}" in definition
    chunks = list(Chunk.objects.filter(index_version=version, document=document).order_by("page__number", "ordinal"))
    # Each picture also gets its own words (ingestion.pictures): the figure, and the scan on page 2.
    assert [(c.kind, c.location["page"]) for c in chunks] == [
        ("text", 1),
        ("table", 1),
        ("image", 1),
        ("picture", 1),
        ("text", 1),
        ("picture", 2),
    ]
    assert all(c.location["bbox"] for c in chunks)
    assert chunks[0].location["heading_path"] == ["Travel policy 差旅政策"]
    assert len(chunks[0].embedding) == 384
    assert chunks[0].terms["reimbursed"] == 1
    assert IndexedDocument.objects.filter(document=document, index_version=version, sha256=document.sha256).exists()
    pages = list(document.pages.order_by("number"))
    assert not pages[0].render  # drawn from the original on first view
    assert ensure_render(pages[0])
    pages[0].refresh_from_db()
    assert pages[0].render.read().startswith(b"\x89PNG")
    assert pages[1].needs_ocr
    assert pages[1].render  # the OCR read this one
    image = chunks[2]
    stored = PageImage.objects.get(page=pages[0], sha256=image.location["image"])
    assert stored.bbox == image.location["bbox"]
    assert stored.file.read().startswith(b"\x89PNG")
    run.refresh_from_db()
    assert (run.status, run.progress, run.counts["chunks_written"]) == ("succeeded", 2, 6)


def test_it_does_no_work_for_an_identical_file(db, private_collection, embedder, tmp_path):
    data = handbook_pdf(tmp_path / "h.pdf").read_bytes()
    _document, run = add(private_collection, "handbook.pdf", data)
    run_it(run, embedder)
    before = embedder.texts
    _again_document, again_run = actions.do_add_document(private_collection, "handbook.pdf", data)
    assert again_run is None
    assert embedder.texts == before


def test_it_re_embeds_only_the_changed_page(db, private_collection, embedder, tmp_path):
    _document, run = add(private_collection, "rules.pdf", ten_pages(tmp_path / "a.pdf").read_bytes())
    run_it(run, embedder)
    ids_before = dict(Chunk.objects.values_list("page__number", "id"))
    texts_before = embedder.texts
    document, run = add(private_collection, "rules.pdf", ten_pages(tmp_path / "b.pdf", changed=7).read_bytes())
    result = run_it(run, embedder)
    assert result is not None
    assert (result.pages_indexed, result.pages_kept) == (1, 9)
    page7 = Chunk.objects.filter(document=document, page__number=7)
    assert embedder.texts - texts_before == page7.count()
    ids_after = dict(Chunk.objects.values_list("page__number", "id"))
    assert {n: i for n, i in ids_after.items() if n != 7} == {n: i for n, i in ids_before.items() if n != 7}
    assert "Revised wording" in " ".join(chunk.text for chunk in page7)


def test_it_redoes_a_page_whose_chunks_are_incomplete(db, private_collection, embedder, tmp_path):
    document, run = add(private_collection, "rules.pdf", ten_pages(tmp_path / "a.pdf").read_bytes())
    run_it(run, embedder)
    Chunk.objects.filter(document=document, page__number=3).delete()  # as a crash mid-page would leave it
    IndexedDocument.objects.filter(document=document).delete()
    rerun = IngestionRun.objects.create(collection=private_collection, document=document)
    result = run_it(rerun, embedder)
    assert result is not None
    assert (result.pages_indexed, result.pages_kept) == (1, 9)
    assert IndexedPage.objects.filter(page__document=document).count() == 10


# A page is valid when all its chunks exist with the right dims and complete metadata.


@pytest.mark.django_db
@pytest.mark.parametrize(
    "damage",
    [{"embedding": None}, {"embedding": [0.1, 0.2, 0.3]}, {"location": {}}],
    ids=["no-vector", "wrong-dims", "no-location"],
)
def test_a_page_whose_chunk_lost_its_vector_or_metadata_is_the_only_one_redone(
    private_collection, embedder, tmp_path, damage
):
    document, run = add(private_collection, "rules.pdf", ten_pages(tmp_path / "a.pdf").read_bytes())
    run_it(run, embedder)
    IndexedDocument.objects.filter(document=document).delete()  # unsearchable, as a crash would leave it
    chunk = Chunk.objects.filter(document=document, page__number=4).first()
    assert chunk is not None
    Chunk.objects.filter(pk=chunk.pk).update(**damage)
    before = embedder.texts
    result = run_it(IngestionRun.objects.create(collection=private_collection, document=document), embedder)
    assert result is not None
    assert (result.pages_indexed, result.pages_kept) == (1, 9)
    redone = Chunk.objects.filter(document=document, page__number=4)
    assert embedder.texts - before == redone.count()
    assert all(c.embedding is not None and len(c.embedding) == 384 and c.location["page"] == 4 for c in redone)
    assert IndexedDocument.objects.filter(document=document).exists()


def test_it_fails_a_broken_file_readably_and_keeps_the_others(db, private_collection, embedder, tmp_path):
    good, good_run = add(private_collection, "notes.md", "# 标题\n\n正文。".encode())
    run_it(good_run, embedder)
    broken = handbook_pdf(tmp_path / "h.pdf").read_bytes()[:400] + b"garbage"
    document, run = add(private_collection, "broken.pdf", broken)
    assert run_it(run, embedder) is None
    run.refresh_from_db()
    document.refresh_from_db()
    assert run.status == "failed"
    assert "PDF" in run.error
    assert document.status == "failed"
    assert document.error == run.error
    assert Document.objects.get(pk=good.pk).status == "ready"


# Bad input: a readable error on that document's run; other files go on.


def truncated_jpeg(_tmp_path) -> bytes:
    data = photo_jpeg()
    return data[: len(data) // 2]


def decompression_bomb(_tmp_path) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("1", (1500, 1000)).save(buffer, format="PNG")  # 1.5 MP in a few hundred bytes
    return buffer.getvalue()


def recording_without_picture(tmp_path) -> bytes:
    return media_files.make_audio_only(tmp_path / "sound.m4a").read_bytes()


def gbk_csv_with_mixed_delimiters(_tmp_path) -> bytes:
    return "项目,金额,备注\n差旅,1200,北京\n培训;800;内部\n办公;56;笔\n".encode("gbk")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "make", "message"),
    [
        ("empty.pdf", lambda _tmp_path: ZERO_PAGE_PDF, "The PDF has no pages."),
        ("photo.jpg", truncated_jpeg, "damaged or incomplete"),
        ("huge.png", decompression_bomb, "PORTAL_MAX_IMAGE_MEGAPIXELS"),
        ("sound.mp4", recording_without_picture, "no video picture"),
        ("预算.csv", gbk_csv_with_mixed_delimiters, "mixes delimiters: both “,” and “;”"),
    ],
)
def test_bad_files_fail_their_own_run_readably_and_the_others_stay_searchable(
    private_collection, embedder, tmp_path, settings, name, make, message
):
    settings.MAX_IMAGE_MEGAPIXELS = 1
    good, good_run = add(private_collection, "notes.md", f"# Notes\n\n{POLICY}".encode())
    run_it(good_run, embedder)
    document, run = add(private_collection, name, make(tmp_path))
    assert run_it(run, embedder) is None
    run.refresh_from_db()
    document.refresh_from_db()
    assert run.status == IngestionRun.Status.FAILED
    assert message in run.error
    assert "Traceback" not in run.error
    assert (document.status, document.error) == (Document.Status.FAILED, run.error)
    good.refresh_from_db()
    assert good.status == Document.Status.READY
    assert IndexedDocument.objects.filter(document=good).exists()


def test_it_stops_when_cancelled(db, private_collection, embedder, tmp_path):
    _document, run = add(private_collection, "rules.pdf", ten_pages(tmp_path / "a.pdf").read_bytes())
    IngestionRun.objects.filter(pk=run.pk).update(cancel_requested=True)
    assert run_it(run, embedder) is None
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert run.progress == 1  # it stops at the first check, after one page
    assert not IndexedDocument.objects.exists()


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("empty.txt", b"", "empty"),
        ("blob.txt", bytes(range(256)) * 4, "cannot be indexed"),
        ("../../etc/passwd\x00.md", b"# ok", None),
    ],
)
def test_it_refuses_bad_uploads_before_storing_them(db, private_collection, name, data, message):
    if message is None:
        document, _run = actions.do_add_document(private_collection, name, data)
        assert document.rel_path == "etc/passwd.md"
        assert ".." not in document.file.name
        return
    with pytest.raises(ValidationError, match=message):
        actions.do_add_document(private_collection, name, data)
    assert not Document.objects.exists()


def test_it_hides_documents_and_runs_of_other_collections_in_the_admin(client, db, private_collection, tmp_path):
    from django.contrib.auth.models import Permission

    from tests.conftest import make_user

    add(private_collection, "notes.md", "# 标题\n\n正文。".encode())
    staff = make_user("sam", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(codename__in=["view_document", "view_ingestionrun"]))
    client.force_login(staff)
    document = Document.objects.get()
    assert client.get(f"/admin/knowledge/document/{document.pk}/change/").status_code == 404
    assert "notes.md" not in client.get("/admin/knowledge/document/").content.decode()
    run = IngestionRun.objects.get()
    assert client.get(f"/admin/ingestion/ingestionrun/{run.pk}/change/").status_code == 404


def test_it_adds_a_page_summary_when_the_collection_asks(db, private_collection, embedder):
    private_collection.settings = {"page_summaries": True}
    private_collection.save(update_fields=["settings"])
    text = (
        "# 差旅制度\n\n"
        + "员工出差可以报销交通、住宿和餐饮费用，住宿标准按城市分级：一线城市每晚六百元，其他城市四百元。" * 6
    )
    _document, run = add(private_collection, "差旅.md", text.encode())
    run_it(run, embedder)
    private_collection.refresh_from_db()
    assert private_collection.active_version is not None
    assert private_collection.active_version.config["page_summaries"] is True
    summary = Chunk.objects.get(kind="summary")
    assert 0 < len(summary.text) < len(text)
    assert summary.location["heading_path"] == ["差旅制度"]
    assert summary.embedding is not None


def test_a_pdfs_progress_says_how_many_pages_it_has(db, private_collection, embedder, tmp_path, monkeypatch):
    sent: list[dict] = []
    monkeypatch.setattr("ingestion.pipeline.EVENT_INTERVAL", 0.0)
    monkeypatch.setattr("ingestion.pipeline.send_collection_event_on_commit", lambda _id, event: sent.append(event))
    _document, run = add(private_collection, "handbook.pdf", handbook_pdf(tmp_path / "h.pdf").read_bytes())
    run_it(run, embedder)
    events = [event for event in sent if event["type"] == "document.progress"]
    assert [(event["pages_done"], event["pages_total"]) for event in events] == [(1, 2), (2, 2)]
    # The pace so far, and the time the pages left will take at it: none after the last.
    assert all(event["pages_per_second"] > 0 for event in events)
    assert events[0]["seconds_left"] is not None
    assert events[0]["seconds_left"] >= 0
    assert events[-1]["seconds_left"] == 0
    run.refresh_from_db()
    assert run.total == 2


def test_a_markdown_files_progress_says_how_many_sections_it_has(db, private_collection, embedder, monkeypatch):
    sent: list[dict] = []
    monkeypatch.setattr("ingestion.pipeline.EVENT_INTERVAL", 0.0)
    monkeypatch.setattr("ingestion.pipeline.send_collection_event_on_commit", lambda _id, event: sent.append(event))
    text = "\n\n".join(f"# Part {n}\n\nRule {n} of the travel policy." for n in range(1, 4))
    _document, run = add(private_collection, "policy.md", text.encode())
    run_it(run, embedder)
    events = [event for event in sent if event["type"] == "document.progress"]
    assert [(event["pages_done"], event["pages_total"]) for event in events] == [(1, 3), (2, 3), (3, 3)]


def test_it_embeds_several_pages_chunks_in_one_call_each_chunk_its_own_vector(db, private_collection, embedder):
    from tests.ingestion.test_recovery import long_pdf

    document, run = add(private_collection, "long.pdf", long_pdf(40))
    result = run_it(run, embedder)
    assert result is not None
    assert result.pages == 40
    # Batches of several pages (ingestion.index.EMBED_BATCH_CHARS), not one call a page nor one for all.
    assert 2 < len(embedder.batches) < 10
    chunks = Chunk.objects.filter(document=document)
    assert chunks.count() == embedder.texts
    assert IndexedPage.objects.filter(page__document=document).count() == 40
    vectors = {text: vector for texts, batch in embedder.batches for text, vector in zip(texts, batch, strict=True)}
    for chunk in chunks.select_related("page"):
        # Its own text's vector, not a neighbour's shifted into its place.
        expected = next(vector for text, vector in vectors.items() if text.endswith(chunk.text))
        assert list(chunk.embedding) == pytest.approx(expected, abs=1e-6)


class WatchingEmbedder(CountingEmbedder):
    """The real embedder, which before each call searches as alice would and notes which
    pages of the document answer, and what the document's status is then; `stop_at`: the
    call at which it asks the run to cancel."""

    def __init__(self, user, document, stop_at: int | None = None) -> None:
        super().__init__()
        self.user, self.document, self.stop_at = user, document, stop_at
        self.seen: list[tuple[str, set[int]]] = []

    def embed_documents(self, texts):
        from assistant.retrieval.search import search

        found = search(self.user, "Chapter 1. Rule 1 says travel costs", k=5, rerank=False)
        status = Document.objects.get(pk=self.document.pk).status
        self.seen.append((status, {hit.page_number for hit in found.hits if hit.document_id == self.document.pk}))
        if self.stop_at is not None and len(self.batches) + 1 == self.stop_at:
            IngestionRun.objects.filter(document=self.document).update(cancel_requested=True)
        return super().embed_documents(texts)


def test_a_long_documents_first_pages_are_searchable_while_the_rest_is_indexed(db, alice, private_collection):
    from tests.ingestion.test_recovery import long_pdf

    document, run = add(private_collection, "long.pdf", long_pdf(40))
    watching = WatchingEmbedder(alice, document)
    assert run_it(run, watching) is not None
    # Nothing before the first call; the first page is a batch of its own, searchable from the
    # second call on, while the document is still being indexed.
    assert watching.seen[0] == ("processing", set())
    assert len(watching.seen) > 3
    assert all(status == "processing" and 1 in pages for status, pages in watching.seen[1:])
    assert len(watching.batches[0][0]) == Chunk.objects.filter(document=document, page__number=1).count()
    private_collection.refresh_from_db()
    version_id = private_collection.active_version_id
    assert kept_statistics(version_id) == recounted(version_id)
    assert Chunk.objects.filter(document=document).exclude(searchable=True).count() == 0


def test_a_cancelled_run_takes_its_written_pages_out_of_search(db, alice, private_collection):
    from tests.ingestion.test_recovery import long_pdf

    document, run = add(private_collection, "long.pdf", long_pdf(40))
    watching = WatchingEmbedder(alice, document, stop_at=3)
    assert run_it(run, watching) is None
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert 1 in watching.seen[-1][1]  # searchable until it stopped
    assert IndexedPage.objects.filter(page__document=document).exists()  # kept for the next run
    assert not Chunk.objects.filter(document=document, searchable=True).exists()
    private_collection.refresh_from_db()
    version_id = private_collection.active_version_id
    assert kept_statistics(version_id) == recounted(version_id) == (0, 0, {})

    # The next run keeps those pages, makes them searchable again, and counts nothing twice.
    kept = IndexedPage.objects.filter(page__document=document).count()
    result = run_it(actions.do_rerun_document(document, enqueue=False), CountingEmbedder())
    assert result is not None
    assert result.pages_kept == kept
    assert not Chunk.objects.filter(document=document, searchable=False).exists()
    assert kept_statistics(version_id) == recounted(version_id)


def test_statistics_stay_exact_when_a_half_indexed_document_is_run_again_or_deleted(db, private_collection):
    """A run whose worker died leaves its written pages searchable and counted; the next run
    counts them out first and in again as it writes, and deleting the document counts out
    whatever is searchable, whole or not."""
    from ingestion import stats
    from knowledge.actions import do_delete_document
    from knowledge.models import Page
    from tests.ingestion.test_recovery import long_pdf

    class Died(BaseException):
        pass

    class DyingEmbedder(CountingEmbedder):
        def embed_documents(self, texts):
            if len(self.batches) == 3:
                raise Died
            return super().embed_documents(texts)

    document, run = add(private_collection, "long.pdf", long_pdf(40))
    other, other_run = add(private_collection, "other.pdf", long_pdf(3))
    assert run_it(other_run, CountingEmbedder()) is not None
    with pytest.raises(Died):
        run_it(run, DyingEmbedder())
    private_collection.refresh_from_db()
    version_id = private_collection.active_version_id
    written = Chunk.objects.filter(document=document, searchable=True).values_list("page__number", flat=True)
    assert 1 in written
    assert len(set(written)) < 40
    assert kept_statistics(version_id) == recounted(version_id)

    assert run_it(actions.do_rerun_document(document, enqueue=False), CountingEmbedder()) is not None
    assert kept_statistics(version_id) == recounted(version_id)
    whole = recounted(version_id)

    # Half-indexed again (a page made searchable by hand, its document not whole), then deleted.
    IndexedDocument.objects.filter(document=document).delete()
    first_two = Page.objects.filter(document=document, number__lte=2).values_list("pk", flat=True)
    stats.add_pages(version_id, document.pk, list(first_two))
    assert 0 < recounted(version_id)[0] < whole[0]
    assert kept_statistics(version_id) == recounted(version_id)
    do_delete_document(document)
    assert kept_statistics(version_id) == recounted(version_id)
    assert recounted(version_id)[0] == Chunk.objects.filter(document=other).count()


@pytest.mark.parametrize(
    ("chars", "seconds", "calls"),
    [
        (10**9, 3600.0, 2),  # the first page alone, then the other nine together at the end
        (10**9, 0.0, 10),  # pages slow to parse: each written once it has waited long enough
    ],
)
def test_a_batch_is_written_when_full_or_when_its_first_page_has_waited(
    db, private_collection, embedder, tmp_path, monkeypatch, chars, seconds, calls
):
    monkeypatch.setattr("ingestion.pipeline.EMBED_BATCH_CHARS", chars)
    monkeypatch.setattr("ingestion.pipeline.EMBED_BATCH_SECONDS", seconds)
    document, run = add(private_collection, "rules.pdf", ten_pages(tmp_path / "a.pdf").read_bytes())
    assert run_it(run, embedder) is not None
    assert len(embedder.batches) == calls
    assert not Chunk.objects.filter(document=document, searchable=False).exists()


def test_a_contents_page_is_stored_as_written_and_embedded_without_its_leaders(db, private_collection, embedder):
    lines = [f"{n}. Chapter {n} . . . . . . . . . . . . . . . {n * 7}" for n in range(1, 6)]
    contents = "# Contents\n\n" + "\n".join(lines)
    _document, run = add(private_collection, "contents.md", contents.encode())
    assert run_it(run, embedder) is not None
    chunks = Chunk.objects.filter(page__document__collection=private_collection)
    stored = " ".join(chunks.values_list("text", flat=True))
    assert "Chapter 3 . . . . . . . . . . . . . . . 21" in stored
    embedded = " ".join(text for texts, _vectors in embedder.batches for text in texts)
    assert "Chapter 3 … 21" in embedded
    assert ". . ." not in embedded

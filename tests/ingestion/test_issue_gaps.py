"""Requirements of the ingestion issues that no other test proved: searches while a new
index version flips in, folder syncs that keep what a refused file replaced, pages whose
chunks lost their vectors or metadata, transient model errors retried by the task, PDFs
with no pages and header bands, broken media failing their own run through the pipeline,
video citations with their times, subtitles and video links found by a real search, and a
slide's picture captioned with the slide's title.

Real PostgreSQL + pgvector, the local embedder; fakes only at the embedder's boundary."""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from assistant.retrieval import search as search_module
from assistant.retrieval.search import search
from ingestion import actions, versions
from ingestion.models import IngestionRun
from ingestion.parsers.base import ParseError, parser_for
from ingestion.pipeline import claim, ingest_document
from knowledge.models import Chunk, Collection, Document, IndexedDocument, IndexVersion
from providers import registry
from providers.base import ProviderError
from tests.ingestion import media_files
from tests.ingestion.files import png
from tests.ingestion.image_files import photo_jpeg
from tests.ingestion.test_pipeline import CountingEmbedder, add, run_it, ten_pages

POLICY = "公司的差旅报销政策规定，员工出差期间的住宿标准按城市等级执行，北京每晚不超过600元。"


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.KEEP_VERSIONS = 1


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


def drain(collection: Collection) -> None:
    for run in IngestionRun.objects.filter(collection=collection, status=IngestionRun.Status.QUEUED).order_by("pk"):
        assert claim(run)
        ingest_document(run, registry.text_embedder())


def indexed_markdown(collection: Collection, count: int = 3) -> Collection:
    for n in range(count):
        actions.do_add_document(collection, f"policy{n}.md", f"# 政策 {n}\n\n{POLICY * 3}".encode(), enqueue=False)
    drain(collection)
    collection.refresh_from_db()
    return collection


def active_number(collection: Collection) -> int:
    collection.refresh_from_db()
    assert collection.active_version is not None
    return collection.active_version.number


def versions_of(chunk_ids: Sequence[int]) -> set[int]:
    return set(Chunk.objects.filter(pk__in=chunk_ids).values_list("index_version__number", flat=True))


# A reindex while queries run never shows an empty or mixed version (issue 4, Tests).


@pytest.mark.django_db
def test_a_search_that_starts_before_a_flip_still_finds_one_whole_version(alice, private_collection, monkeypatch):
    collection = indexed_markdown(private_collection)
    versions.start_reindex(collection, registry.text_embedder(), enqueue=False)
    real_scope_for = search_module.scope_for

    def flip_after_scoping(user, collection_ids=None):  # the build completes mid-search
        scope = real_scope_for(user, collection_ids)
        drain(collection)
        return scope

    monkeypatch.setattr(search_module, "scope_for", flip_after_scoping)
    results = search(alice, "北京 住宿标准", collection_ids=[collection.pk], rerank=False)
    assert active_number(collection) == 2  # it did flip
    assert results.hits, "a search during the flip found nothing"
    assert len(versions_of([hit.chunk_id for hit in results.hits])) == 1


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_searches_running_through_a_reindex_never_see_an_empty_or_mixed_version(alice, private_collection, settings):
    settings.KEEP_VERSIONS = 5  # every version's chunks stay, to tell afterwards which one each search read
    collection = indexed_markdown(private_collection, count=4)
    found: list[list[int]] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def query_until_done() -> None:
        try:
            while not done.is_set():
                hits = search(alice, "北京 住宿标准", collection_ids=[collection.pk], rerank=False).hits
                found.append([hit.chunk_id for hit in hits])
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    searcher = threading.Thread(target=query_until_done)
    searcher.start()
    try:
        versions.start_reindex(collection, registry.text_embedder(), enqueue=False)
        drain(collection)
        versions.start_reindex(collection, registry.text_embedder(), enqueue=False)
        drain(collection)
    finally:
        done.set()
        searcher.join(60)
    assert not errors, errors
    assert len(found) >= 3
    assert all(found), "a search during the reindex found nothing"
    read = [versions_of(ids) for ids in found]
    assert all(len(numbers) == 1 for numbers in read), read
    assert active_number(collection) == 3


# The folder sync (issue 4, Sources): changed files are ingested; nothing stored is lost.


@pytest.mark.django_db
def test_a_folder_sync_ingests_a_changed_file_and_keeps_a_document_whose_new_file_is_refused(
    private_collection, tmp_path, capsys, settings
):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "travel.md").write_text("# 差旅\n\n住宿每晚 600 元。", encoding="utf-8")
    (folder / "leave.md").write_text("# 年假\n\n每年五天。", encoding="utf-8")
    call_command("ingest", str(folder), collection=private_collection.pk, inline=True)
    assert "2 queued, 0 unchanged, 0 failed, 0 removed" in capsys.readouterr().out

    (folder / "travel.md").write_text("# 差旅\n\n住宿每晚 800 元。", encoding="utf-8")
    (folder / "leave.md").write_bytes(bytes(range(256)) * 4)  # still there, but no longer readable
    call_command("ingest", str(folder), collection=private_collection.pk, inline=True)
    assert "1 queued, 0 unchanged, 1 failed, 0 removed" in capsys.readouterr().out
    assert "800" in Chunk.objects.get(document__rel_path="travel.md").text
    leave = Document.objects.get(rel_path="leave.md")  # its stored content is kept
    assert leave.status == Document.Status.READY
    assert IndexedDocument.objects.filter(document=leave).exists()

    settings.MAX_UPLOAD_MB = 1
    (folder / "leave.md").write_bytes(b"# big\n\n" + b"x" * (2 * 1024 * 1024))  # over the size limit
    call_command("ingest", str(folder), collection=private_collection.pk, inline=True)
    assert "0 queued, 1 unchanged, 1 failed, 0 removed" in capsys.readouterr().out
    assert Document.objects.filter(rel_path="leave.md", status=Document.Status.READY).exists()


# A page is valid when all its chunks exist with the right dims and complete metadata (issue 4).


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


# Celery retries transient model errors with backoff (issue 4, Celery).


class FlakyEmbedder(CountingEmbedder):
    """The real local embedder behind a model server that fails its first `failures` calls."""

    def __init__(self, failures: int, *, retryable: bool = True) -> None:
        super().__init__()
        self.failures, self.retryable, self.calls = failures, retryable, 0

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls <= self.failures:
            raise ProviderError("embedding", "local", "the model server is busy", retryable=self.retryable)
        return super().embed_documents(texts)


@pytest.mark.django_db
def test_a_transient_model_error_is_retried_by_the_task_and_the_run_completes(private_collection, monkeypatch):
    from ingestion import tasks

    options = vars(tasks.ingest_document.__class__)  # what @shared_task was given
    assert ProviderError in options["autoretry_for"]
    assert (options["retry_backoff"], options["max_retries"]) == (5, 5)
    flaky = FlakyEmbedder(failures=2)
    monkeypatch.setattr(registry, "text_embedder", lambda: flaky)
    document, run = actions.do_add_document(private_collection, "a.md", f"# A\n\n{POLICY}".encode(), enqueue=False)
    assert run is not None
    # Eagerly applied, a retry runs again at once (a worker waits 5 s, 10 s, ... first).
    tasks.ingest_document.apply(args=(run.pk,))
    run.refresh_from_db()
    assert (run.status, run.error) == (IngestionRun.Status.SUCCEEDED, "")
    assert flaky.calls == 3
    assert Document.objects.get(pk=document.pk).status == Document.Status.READY


@pytest.mark.django_db
def test_a_permanent_model_error_fails_the_run_readably_without_retrying(private_collection, monkeypatch):
    from ingestion import tasks

    flaky = FlakyEmbedder(failures=99, retryable=False)
    monkeypatch.setattr(registry, "text_embedder", lambda: flaky)
    document, run = actions.do_add_document(private_collection, "a.md", f"# A\n\n{POLICY}".encode(), enqueue=False)
    assert run is not None
    tasks.ingest_document.apply(args=(run.pk,))
    run.refresh_from_db()
    assert run.status == IngestionRun.Status.FAILED
    assert "embedding model (local): the model server is busy" in run.error
    assert flaky.calls == 1
    assert Document.objects.get(pk=document.pk).status == Document.Status.FAILED


# Bad input (issues 4 and 5): a readable error on that document's run; other files go on.

ZERO_PAGE_PDF = (
    b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n"
    b"2 0 obj\n<< /Type /Pages /Kids [] /Count 0 >>\nendobj\n"
    b"trailer\n<< /Root 1 0 R >>\n%%EOF\n"
)


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


def test_a_pdfs_running_header_is_left_out_like_its_footer(tmp_path):
    import pymupdf

    document = pymupdf.open()
    page = document.new_page(width=595, height=842)
    page.insert_text((72, 30), "ACME Corp - internal", fontsize=8)  # inside the top 6 %
    page.insert_text((72, 120), "Hotels are capped by city tier.", fontsize=11)
    page.insert_text((72, 820), "page 1 of 1", fontsize=8)
    document.save(tmp_path / "banded.pdf")
    (parsed,) = parser_for("application/pdf").pages(tmp_path / "banded.pdf")
    assert parsed.text == "Hotels are capped by city tier."


def test_a_zero_page_pdf_is_refused_by_the_parser(tmp_path):
    path = tmp_path / "empty.pdf"
    path.write_bytes(ZERO_PAGE_PDF)
    with pytest.raises(ParseError, match="no pages"):
        list(parser_for("application/pdf").pages(path))


@pytest.mark.django_db
def test_the_upload_page_refuses_a_file_over_the_size_limit_and_takes_the_others(
    client, alice, private_collection, settings
):
    settings.MAX_UPLOAD_MB = 1
    client.force_login(alice)
    files = [
        SimpleUploadedFile("big.md", b"# Big\n\n" + b"x" * (1024 * 1024)),
        SimpleUploadedFile("small.md", b"# Small\n\ntext"),
    ]
    page = client.post(reverse("collection-upload", args=[private_collection.pk]), {"files": files}, follow=True)
    assert "“big.md” is larger than the 1 MB upload limit." in page.content.decode()
    assert list(Document.objects.values_list("rel_path", flat=True)) == ["small.md"]


# Video (issue 5): citations carry t_start/t_end; subtitles and video links are found by a search.


@pytest.mark.django_db
def test_a_subtitle_citation_carries_its_times_and_opens_the_moment(alice, private_collection, embedder, tmp_path):
    from assistant.answering.answer import attachment, citation
    from assistant.answering.types import Source

    data = media_files.make_srt(tmp_path / "review.srt").read_bytes()
    _document, run = add(private_collection, "review.srt", data)
    run_it(run, embedder)
    results = search(alice, "Travel costs fell by ten percent", collection_ids=[private_collection.pk], rerank=False)
    hit = results.hits[0]
    assert "Travel costs fell" in hit.text
    assert (hit.kind, hit.page_kind) == ("transcript", "video_segment")
    cited = citation(Source(1, hit), "en")
    assert (cited["location"]["t_start"], cited["location"]["t_end"]) == (62.5, 65.0)
    assert cited["place"] == "01:02"
    attached = attachment(hit)
    assert attached["kind"] == "video"
    assert attached["t_start"] == 62.5
    assert attached["url"].endswith("#t=62.5")


@pytest.mark.django_db
def test_a_video_link_is_found_by_a_search_of_its_words(alice, private_collection, embedder):
    document, run = actions.do_add_video_link(
        private_collection, "https://videos.example.com/onboarding", "Onboarding 入职培训", "How to file expenses"
    )
    assert run is not None
    run_it(run, embedder)
    actions.do_add_document(private_collection, "notes.md", f"# Notes\n\n{POLICY}".encode(), enqueue=False)
    drain(private_collection)
    for query in ("入职培训", "how do I file my expenses"):
        results = search(alice, query, collection_ids=[private_collection.pk], rerank=False)
        assert results.hits[0].document_id == document.pk, query


def test_a_slides_picture_is_captioned_with_the_slides_title(tmp_path, monkeypatch):
    from pptx import Presentation
    from pptx.util import Inches

    from ingestion.parsers import pptx as pptx_parser
    from ingestion.sniff import PPTX

    monkeypatch.setattr(pptx_parser, "libreoffice", lambda: None)

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])  # Title Only
    slide.shapes.title.text = "Claim flow 报销流程"
    slide.shapes.add_picture(io.BytesIO(png(200, 150)), Inches(2), Inches(2), width=Inches(4))
    deck.save(str(tmp_path / "flow.pptx"))
    (page,) = parser_for(PPTX).pages(tmp_path / "flow.pptx")
    (picture,) = [block for block in page.blocks if block.kind == "image"]
    assert picture.text == "Claim flow 报销流程"
    assert picture.read_text is True


# Claim work atomically; a changed embedder builds a new version (issue 4, Celery and Versioned indexes).


@pytest.mark.django_db
def test_a_run_is_claimed_once_and_a_second_task_for_it_does_nothing(private_collection, embedder, monkeypatch):
    from ingestion import tasks

    _document, run = actions.do_add_document(private_collection, "a.md", f"# A\n\n{POLICY}".encode(), enqueue=False)
    assert run is not None
    assert claim(run)
    assert not claim(IngestionRun.objects.get(pk=run.pk))  # another worker got the same message
    monkeypatch.setattr(registry, "text_embedder", lambda: embedder)
    assert tasks.ingest_document.apply(args=(run.pk,)).get() is None
    assert embedder.texts == 0
    assert IngestionRun.objects.get(pk=run.pk).status == IngestionRun.Status.RUNNING  # still the first one's


class RenamedEmbedder(CountingEmbedder):
    """The same vectors under another model id: what changing PROVIDER_EMBEDDING looks like."""

    def __init__(self) -> None:
        super().__init__()
        self.model_id = "local:another-embedder"


@pytest.mark.django_db
def test_a_changed_embedder_builds_a_new_version_while_the_old_one_serves(private_collection):
    collection = indexed_markdown(private_collection, count=1)
    assert versions.reindex_outdated(registry.text_embedder()) == []
    (building,) = versions.reindex_outdated(RenamedEmbedder())
    assert (building.status, building.embedder_id) == (IndexVersion.Status.BUILDING, "local:another-embedder")
    assert active_number(collection) == 1

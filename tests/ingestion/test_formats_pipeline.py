"""The new formats through the real pipeline (PostgreSQL + pgvector, the local embedder, OCR
and speech models): pages, chunk kinds, locations, OCR and transcript text, and slide-level
incremental work."""

from __future__ import annotations

import shutil

import pytest

from ingestion.models import IngestionRun
from knowledge.models import Chunk, Document, Page, PageImage
from tests.ingestion import media_files, office_files, sheet_files
from tests.ingestion.runs import add, run_it

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]


def ingest(collection, name, data, embedder) -> Document:
    document, run = add(collection, name, data)
    run_it(run, embedder)
    run.refresh_from_db()
    assert run.status == IngestionRun.Status.SUCCEEDED, run.error
    document.refresh_from_db()
    return document


def chunks(document: Document) -> list[Chunk]:
    return list(Chunk.objects.filter(document=document).order_by("page__number", "ordinal"))


def test_a_deck_gives_a_page_per_slide_and_a_changed_slide_is_the_only_one_redone(
    private_collection, embedder, tmp_path
):
    from pptx import Presentation

    path = office_files.briefing_pptx(tmp_path / "briefing.pptx")
    document = ingest(private_collection, "briefing.pptx", path.read_bytes(), embedder)
    assert document.page_count == 3
    assert list(document.pages.values_list("kind", flat=True)) == ["slide"] * 3
    found = chunks(document)
    kinds = {(c.location["page"], c.kind) for c in found}
    # Slide 3's picture (a drawn disc, no words in it) is indexed by its description; the OCR's
    # "O" read off the disc is a fragment, not text (ingestion.enrich.worth_indexing).
    assert {(2, "table"), (2, "notes"), (3, "picture")} <= kinds
    assert (3, "image") not in kinds
    notes = next(c for c in found if c.kind == "notes")
    assert "breakfast" in notes.text
    picture = next(c for c in found if c.kind == "picture" and c.location["page"] == 3)
    assert PageImage.objects.filter(page__document=document, sha256=picture.location["image"]).exists()
    slide_one = {c.pk for c in found if c.location["page"] == 1}
    before = embedder.texts

    deck = Presentation(str(path))
    deck.slides[1].shapes.title.text_frame.text = "Hotel caps for 2025"
    deck.save(str(path))
    ingest(private_collection, "briefing.pptx", path.read_bytes(), embedder)
    redone = [c for c in chunks(document) if c.location["page"] == 2]
    assert embedder.texts - before == len(redone)  # slide 2 only
    assert {c.pk for c in chunks(document) if c.location["page"] == 1} == slide_one  # ids kept
    assert all(c.location["heading_path"] == ["Hotel caps for 2025"] for c in redone)


def test_a_word_file_gives_sections_with_tables_and_pictures(private_collection, embedder, tmp_path):
    document = ingest(
        private_collection, "handbook.docx", office_files.handbook_docx(tmp_path / "h.docx").read_bytes(), embedder
    )
    pages = list(document.pages.all())
    assert {page.kind for page in pages} == {"section"}
    assert sum(bool(page.heading_path) for page in pages) >= 3
    kinds = {c.kind for c in chunks(document)}
    assert {"text", "table", "image"} <= kinds


def test_a_long_sheet_keeps_its_header_in_every_table_chunk(private_collection, embedder, tmp_path):
    data = sheet_files.long_xlsx(tmp_path / "l.xlsx", rows=450).read_bytes()
    document = ingest(private_collection, "明细.xlsx", data, embedder)
    assert document.page_count == 3
    tables = [c for c in chunks(document) if c.kind == "table"]
    assert len(tables) > 3
    header = tables[0].text.split("\n", 1)[0]
    assert all(chunk.text.startswith(header) for chunk in tables)


def test_a_gbk_csv_is_read(private_collection, embedder, tmp_path):
    data = sheet_files.gbk_semicolon_csv(tmp_path / "g.csv").read_bytes()
    document = ingest(private_collection, "预算.csv", data, embedder)
    assert document.mime == "text/csv"
    assert any("|" in c.text for c in chunks(document))


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng makes the spoken sentence")
def test_a_video_is_found_by_its_words_on_screen_and_its_speech_with_timestamps(private_collection, embedder, tmp_path):
    data = media_files.make_video(tmp_path / "talk.mp4").read_bytes()
    document = ingest(private_collection, "talk.mp4", data, embedder)
    (page,) = Page.objects.filter(document=document)
    assert page.kind == "video_segment"
    found = chunks(document)
    frames = [c for c in found if c.kind == "frame"]
    assert any("INVOICE" in c.text for c in frames)
    invoice = next(c for c in frames if "INVOICE" in c.text)
    assert invoice.location["t_start"] == pytest.approx(0, abs=0.5)
    assert PageImage.objects.filter(page=page, sha256=invoice.location["image"]).exists()
    (transcript,) = [c for c in found if c.kind == "transcript"]
    assert "is approved" in transcript.text.lower()  # espeak-ng's voice: whisper base gets the end right
    assert 0 <= transcript.location["t_start"] < transcript.location["t_end"] <= 6.5


def test_subtitles_become_timed_chunks(private_collection, embedder, tmp_path):
    data = media_files.make_srt(tmp_path / "talk.srt").read_bytes()
    document = ingest(private_collection, "talk.srt", data, embedder)
    timed = chunks(document)
    assert timed
    assert all(c.kind == "transcript" for c in timed)
    assert all(c.location["t_start"] <= c.location["t_end"] for c in timed)


def test_a_video_link_is_searchable_by_its_text(private_collection, embedder):
    from ingestion import actions

    document, run = actions.do_add_video_link(
        private_collection, "https://videos.example.com/onboarding", "Onboarding 入职培训", "How to file expenses"
    )
    assert run is not None
    run_it(run, embedder)
    text = " ".join(c.text for c in chunks(document))
    assert "How to file expenses" in text
    assert "https://videos.example.com/onboarding" in text

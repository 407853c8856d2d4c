"""The box of a citation's quote on its page (answering.quote_box), through answer.citations():
a real bilingual PDF indexed by the real pipeline, a scanned page and a picture with the OCR
lines their renders were read into, and originals that are damaged or gone."""

from __future__ import annotations

import hashlib
import io
import logging
import re
from dataclasses import replace

import pytest
from django.core.files.base import ContentFile

from assistant.answering import answer as answers
from assistant.answering import quote_box
from assistant.answering.events import Citations, Done, only
from assistant.answering.types import Source
from assistant.retrieval.types import Hit
from ingestion.models import DerivedText
from knowledge.models import Chunk, Document, Page
from tests.assistant.chat_files import ingest_files
from tests.ingestion.files import cjk_font

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

WIDTH, HEIGHT = 595, 842
TITLE = "Leave policy 假期政策"
LINES = [
    "Employees get ten days of paid annual leave per year.",
    "Hotels are capped by city tier, see the table below.",
    "Unused days can be carried over to the next year.",
    "入职满一年的员工每年享有十天带薪年假。",
    "未休完的年假可以累积到下一年，",  # one Chinese sentence across a line break
    "最多累积五天，须经主管批准。",
]


def leave_pdf() -> bytes:
    import pymupdf

    font = str(cjk_font())
    document = pymupdf.open()
    page = document.new_page(width=WIDTH, height=HEIGHT)
    page.insert_text((72, 90), TITLE, fontsize=20, fontname="cjk", fontfile=font)
    for number, line in enumerate(LINES):
        page.insert_text((72, 140 + number * 18), line, fontsize=12, fontname="cjk", fontfile=font)
    data: bytes = document.tobytes()
    return data


def words(needle: str) -> list[list[float]]:
    """Where PyMuPDF itself finds `needle` on the test PDF's page: one rectangle per line."""
    import pymupdf

    with pymupdf.open(stream=leave_pdf(), filetype="pdf") as document:
        return [[r.x0, r.y0, r.x1, r.y1] for r in document.load_page(0).search_for(needle)]


def hit_of(chunk: Chunk) -> Hit:
    document, page = chunk.document, chunk.page
    return Hit(
        chunk.pk,
        document.collection_id,
        document.pk,
        document.name,
        document.rel_path,
        page.pk,
        page.number,
        page.kind,
        chunk.kind,
        chunk.text,
        chunk.location,
    )


@pytest.fixture
def leave(private_collection) -> Hit:
    """The body chunk of the indexed leave policy: every line, under the title."""
    ingest_files(private_collection, {"leave.pdf": leave_pdf()})
    chunks = [hit_of(c) for c in Chunk.objects.filter(document__collection=private_collection).select_related("page")]
    (body,) = [hit for hit in chunks if "paid annual leave" in hit.text]
    assert all(line in " ".join(body.text.split()) for line in LINES[:4]), body.text
    return body


def cite(*quoted: tuple[Hit, str]) -> list[dict]:
    sources = [Source(number, hit) for number, (hit, _quote) in enumerate(quoted, start=1)]
    quotes = {number: quote for number, (_hit, quote) in enumerate(quoted, start=1)}
    return answers.citations([(source, False) for source in sources], "en", quotes)


def area(box) -> float:
    return (box[2] - box[0]) * (box[3] - box[1])


def inside(inner, outer, slack: float = 0.5) -> bool:
    return (
        inner[0] >= outer[0] - slack
        and inner[1] >= outer[1] - slack
        and inner[2] <= outer[2] + slack
        and inner[3] <= outer[3] + slack
    )


def test_an_english_quote_is_boxed_on_its_own_line_inside_the_chunk(leave):
    (cited,) = cite((leave, LINES[0]))
    box, chunk_box = cited["quote_bbox"], cited["location"]["bbox"]
    assert box is not None
    assert 0 <= box[0] < box[2] <= cited["page_width"] == WIDTH
    assert 0 <= box[1] < box[3] <= cited["page_height"] == HEIGHT
    assert inside(box, chunk_box, slack=2)
    assert area(box) < area(chunk_box) / 3  # one line of six
    (quoted,) = words("ten days of paid annual leave")
    assert inside(quoted, box)
    (other,) = words("Hotels are capped")
    assert not inside(other, box)  # the next line is not the quote


def test_a_chinese_quote_is_boxed_even_across_a_line_break(leave):
    one_line, across = cite((leave, LINES[3]), (leave, "可以累积到下一年，最多累积五天"))
    # 年 comes out of the font as U+F98E, which PyMuPDF's search does not match: words without it
    (ten_days,) = words("享有十天带薪")
    assert inside(ten_days, one_line["quote_bbox"])
    assert area(one_line["quote_bbox"]) < area(one_line["location"]["bbox"]) / 3
    assert not inside(words("Unused days")[0], one_line["quote_bbox"])
    box = across["quote_bbox"]
    assert box is not None  # PyMuPDF's own search does not find Chinese across lines
    (first,) = words("可以累积到下")
    (second,) = words("最多累积五天")
    assert inside(first, box)
    assert inside(second, box)
    assert not inside(ten_days, box)
    assert box[3] - box[1] < 3 * 18  # two lines, not the chunk


def test_a_quote_found_only_in_part_is_boxed_by_its_beginning(leave):
    (cited,) = cite((leave, LINES[2] + " Contractors are not covered by this rule at all."))
    (quoted,) = words("Unused days can be carried")
    assert cited["quote_bbox"] is not None
    assert inside(quoted, cited["quote_bbox"])
    assert area(cited["quote_bbox"]) < area(cited["location"]["bbox"]) / 3


def test_a_quote_that_is_not_on_the_page_has_no_box(leave):
    missing, blank = cite((leave, "Contractors get no paid leave at all."), (leave, ""))
    assert missing["quote_bbox"] is None
    assert blank["quote_bbox"] is None
    assert missing["quote"] == "Contractors get no paid leave at all."  # the rest of the citation is there


def test_words_outside_the_chunks_box_are_not_its_quote(leave):
    """The title is on the page but not in the body chunk's box: no box in the wrong place."""
    (cited,) = cite((leave, TITLE))
    assert cited["quote_bbox"] is None


def test_a_damaged_or_missing_original_gives_no_box_and_no_error(leave, caplog):
    document = Document.objects.get(pk=leave.document_id)
    path = document.file.path
    with open(path, "wb") as handle:
        handle.write(b"%PDF-1.7\n" + b"\x00" * 64)  # a header and nothing after it
    with caplog.at_level(logging.INFO, logger="assistant.answering.quote_box"):
        (damaged,) = cite((leave, LINES[0]))
    assert damaged["quote_bbox"] is None
    assert "cannot be opened" in caplog.text
    document.file.storage.delete(document.file.name)
    (missing,) = cite((leave, LINES[0]))
    assert missing["quote_bbox"] is None
    assert missing["location"]["bbox"]


def test_each_document_is_opened_once_and_the_work_is_capped(leave, monkeypatch):
    import pymupdf

    opened = []
    real_open = pymupdf.open

    def counted(*args, **kwargs):
        opened.append(args)
        return real_open(*args, **kwargs)

    monkeypatch.setattr(pymupdf, "open", counted)
    cited = cite(*[(leave, LINES[0])] * 3)
    assert len(opened) == 1
    assert cited[0]["quote_bbox"] is not None
    assert [c["quote_bbox"] for c in cited] == [cited[0]["quote_bbox"]] * 3
    many = [replace(leave, chunk_id=leave.chunk_id + n) for n in range(10)]
    boxes = quote_box.quote_boxes((hit, LINES[0]) for hit in many)
    assert len(boxes) == 10
    assert sum(box is not None for box in boxes) == quote_box.MAX_CITATIONS


# -- OCR lines ----------------------------------------------------------------------------------


def png(width: int, height: int) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (255, 255, 255)).save(buffer, format="PNG")
    return buffer.getvalue()


def read_page(collection, *, kind: str, original: bytes, mime: str, size: tuple[float, float], render: bytes, ocr):
    """A document with one page whose render the OCR read into `ocr` lines (pixel boxes)."""
    document = Document(
        collection=collection,
        name=f"scan.{kind}",
        rel_path=f"scan.{kind}",
        sha256=hashlib.sha256(original).hexdigest(),
        size=len(original),
        mime=mime,
        status=Document.Status.READY,
    )
    document.file.save("original", ContentFile(original), save=False)
    document.save()
    page = Page(
        document=document, number=1, kind=kind, content_sha256="0" * 64, width=size[0], height=size[1], needs_ocr=True
    )
    page.render.save("1.png", ContentFile(render), save=False)
    page.save()
    DerivedText.objects.create(
        task=DerivedText.Task.OCR, model_id="test-ocr", input_sha256=hashlib.sha256(render).hexdigest(), output=ocr
    )
    return page


def ocr_hit(page: Page, text: str, bbox: list[float]) -> Hit:
    document = page.document
    location = {"page": 1, "bbox": bbox, "heading_path": []}
    return Hit(
        1,
        document.collection_id,
        document.pk,
        document.name,
        document.rel_path,
        page.pk,
        1,
        page.kind,
        "text",
        text,
        location,
    )


INVOICE = [
    ["Invoice 2024", [20.0, 20.0, 180.0, 44.0]],
    ["total 350 yuan", [20.0, 60.0, 200.0, 84.0]],
    ["差旅费用凭发票报销", [20.0, 100.0, 260.0, 124.0]],
]


def test_a_pictures_quote_is_boxed_by_the_ocr_lines_that_hold_it(private_collection):
    render = png(300, 160)
    page = read_page(
        private_collection, kind="image", original=render, mime="image/png", size=(300, 160), render=render, ocr=INVOICE
    )
    hit = ocr_hit(page, "Invoice 2024\n\ntotal 350 yuan\n\n差旅费用凭发票报销", [20.0, 20.0, 260.0, 124.0])
    (one,) = cite((hit, "差旅费用凭发票报销"))
    assert one["quote_bbox"] == [20.0, 100.0, 260.0, 124.0]
    (two,) = cite((hit, "2024 total 350"))
    assert two["quote_bbox"] == [20.0, 20.0, 200.0, 84.0]
    (none,) = cite((hit, "paid annual leave"))
    assert none["quote_bbox"] is None


def test_a_scanned_pdf_pages_quote_is_boxed_in_points_from_its_ocr(private_collection):
    import pymupdf

    blank = pymupdf.open()
    blank.new_page(width=WIDTH, height=HEIGHT)  # no text layer: PyMuPDF finds nothing
    render = png(WIDTH * 2, HEIGHT * 2)  # OCR'd at twice the page's size
    page = read_page(
        private_collection,
        kind="pdf_page",
        original=blank.tobytes(),
        mime="application/pdf",
        size=(WIDTH, HEIGHT),
        render=render,
        ocr=INVOICE,
    )
    hit = ocr_hit(page, "Invoice 2024\n\ntotal 350 yuan\n\n差旅费用凭发票报销", [10.0, 10.0, 130.0, 62.0])
    (cited,) = cite((hit, "total 350 yuan"))
    assert cited["quote_bbox"] == [10.0, 30.0, 100.0, 42.0]


def test_a_picture_without_ocr_output_has_no_box(private_collection):
    render = png(300, 160)
    page = read_page(
        private_collection, kind="image", original=render, mime="image/png", size=(300, 160), render=render, ocr=[]
    )
    hit = ocr_hit(page, "Invoice 2024", [20.0, 20.0, 180.0, 44.0])
    (cited,) = cite((hit, "Invoice 2024"))
    assert cited["quote_bbox"] is None


def test_an_answers_citation_event_carries_its_quotes_box(policies, alice):
    """Through the answering pipeline (a scripted chat model): the box is in the `citations`
    event and in the stored message."""
    from assistant.answering.pipeline import answer_events, start
    from assistant.models import Message
    from tests.assistant.test_answering import ScriptedChat

    def answer(prompt: str) -> str:
        number = re.search(r"\[(\d+)\][^\n]*最多累积五天", prompt)
        assert number, prompt
        return f"可以累积，最多五天 [{number.group(1)}]。"

    session = start(alice, "未休完的年假可以累积吗？", collection_ids=[policies.pk])
    events = list(answer_events(session, model=ScriptedChat(answer=answer)))
    (cited,) = next(event.citations for event in only(events, Citations))
    assert "最多累积五天" in cited["quote"]
    box, chunk_box = cited["quote_bbox"], cited["location"]["bbox"]
    assert box is not None
    assert inside(box, chunk_box, slack=2)
    assert area(box) < area(chunk_box) / 2
    assert Message.objects.get(pk=only(events, Done)[-1].message).citations[0]["quote_bbox"] == box


# Two columns as the OCR returns them, top to bottom across the gutter: a line of each in turn.
TWO_COLUMNS = [
    [text, [x0, y, x0 + 130.0, y + 14.0]]
    for y, pair in zip(
        (20.0, 40.0, 60.0, 80.0),
        (
            ("Expense claims need", "Leave requests go"),
            ("an invoice and the", "to the team lead"),
            ("approval of a manager", "two weeks ahead"),
            ("within thirty days", "of the first day"),
        ),
        strict=True,
    )
    for x0, text in zip((20.0, 170.0), pair, strict=True)
]


def test_a_quote_across_lines_of_a_column_is_boxed_in_reading_order(private_collection):
    render = png(320, 120)
    page = read_page(
        private_collection, kind="image", original=render, mime="image/png", size=(320, 120), render=render,
        ocr=TWO_COLUMNS,
    )  # fmt: skip
    hit = ocr_hit(page, "Expense claims need an invoice and the approval", [0.0, 0.0, 320.0, 120.0])
    (cited,) = cite((hit, "need an invoice and the approval of a manager"))
    assert cited["quote_bbox"] == [20.0, 20.0, 150.0, 74.0]

"""Small real Word and PowerPoint files for the parser tests, made with python-docx, python-pptx
and Pillow. The expected results live with the tests; the comments here say what each part is for."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from tests.ingestion.files import png

if TYPE_CHECKING:
    from docx.document import Document as WordDocument

HEADER = "Company confidential - header"
FOOTER = "Page footer - do not index"


def jpeg(width: int, height: int, mode: str = "RGB") -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new(mode, (width, height), 200).save(buffer, format="JPEG")
    return buffer.getvalue()


def handbook_docx(path: Path) -> Path:
    """A line before the title; Title > Heading 1 > Heading 2 sections with English and Chinese
    text, a table with a vertical and a horizontal merge, a picture in a paragraph with text, a
    picture alone followed by its caption, an icon too small to keep; an empty chapter; and a
    header and footer that must not be read."""
    from docx import Document
    from docx.shared import Inches

    document = Document()
    document.sections[0].header.paragraphs[0].text = HEADER
    document.sections[0].footer.paragraphs[0].text = FOOTER
    document.add_paragraph("Draft for review.")
    document.add_heading("Travel handbook 差旅手册", level=0)
    document.add_heading("Reimbursement", level=1)
    document.add_paragraph("Employees are reimbursed for transport and hotels.")
    document.add_paragraph("差旅费用凭发票报销。")
    document.add_heading("Hotels", level=2)
    _caps_table(document)
    document.add_heading("Receipts", level=2)
    stamped = document.add_paragraph("Stamped receipt example:")
    stamped.add_run().add_picture(io.BytesIO(jpeg(120, 90)), width=Inches(1.2))
    document.add_picture(io.BytesIO(png(160, 120)), width=Inches(1.6))
    document.add_paragraph("Figure 1: 报销流程 the claim flow.")
    icon = document.add_paragraph("Submit receipts within 15 days.")
    icon.add_run().add_picture(io.BytesIO(png(32, 32)))
    document.add_heading("Empty chapter", level=1)
    document.add_heading("Contacts", level=1)
    document.add_paragraph("Write to hr@example.com.")
    document.add_picture(io.BytesIO(png(100, 100)))  # last in its section: captioned from above
    document.save(str(path))
    return path


def content_controls_docx(path: Path) -> Path:
    """A table of contents and a paragraph, each in a content control (w:sdt), around a heading."""
    from docx import Document
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    document = Document()
    document.add_heading("Policy", level=1)
    body = document.element.body
    gallery = '<w:sdtPr><w:docPartObj><w:docPartGallery w:val="Table of Contents"/></w:docPartObj></w:sdtPr>'
    for properties, text in ((gallery, "Policy ........ 1"), ("<w:sdtPr/>", "Filled in from a form.")):
        paragraph = f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>"
        control = f"<w:sdt {nsdecls('w')}>{properties}<w:sdtContent>{paragraph}</w:sdtContent></w:sdt>"
        body.insert(len(body) - 1, parse_xml(control))  # before the closing w:sectPr
    document.save(str(path))
    return path


def _caps_table(document: WordDocument) -> None:
    """City | Tier | Cap, where Shanghai shares Beijing's tier cell (vertical merge) and
    Chengdu's tier and cap are one cell (horizontal merge)."""
    rows = [("City", "Tier", "Cap"), ("Beijing", "1", "600"), ("Shanghai", "", "600"), ("Chengdu", "", "")]
    table = document.add_table(rows=len(rows), cols=3)
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    table.cell(1, 1).merge(table.cell(2, 1))
    table.cell(3, 1).merge(table.cell(3, 2)).text = "Ask HR"


def briefing_pptx(path: Path) -> Path:
    """Slide 1: title, bullets, and a group that was moved and stretched after its text box was
    put in it. Slide 2: title, a table with a merged row, a text box, speaker notes. Slide 3: no
    title, a picture, an icon too small to keep, a text box."""
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()  # 10 x 7.5 inches: 720 x 540 points
    first = deck.slides.add_slide(deck.slide_layouts[1])  # Title and Content
    first.shapes.title.text = "Travel policy 差旅政策"
    body = first.placeholders[1].text_frame
    body.text = "Book hotels through the portal"
    body.add_paragraph().text = "差旅费用凭发票报销"
    group = first.shapes.add_group_shape()
    group.shapes.add_textbox(Inches(1), Inches(1), Inches(2), Inches(0.5)).text_frame.text = "Questions? Ask HR."
    group.left, group.top, group.width = Inches(5), Inches(6), Inches(4)  # moves the frame, not the child

    second = deck.slides.add_slide(deck.slide_layouts[5])  # Title Only
    second.shapes.title.text = "Hotel caps"
    table = second.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(1.5)).table
    for r, row in enumerate([("City", "Cap"), ("Beijing", "600"), ("Other cities: ask HR", "")]):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    table.cell(2, 0).merge(table.cell(2, 1))
    second.shapes.add_textbox(Inches(1), Inches(4), Inches(6), Inches(0.5)).text_frame.text = "Caps are per night."
    second.notes_slide.notes_text_frame.text = "Remind everyone that caps include breakfast."

    third = deck.slides.add_slide(deck.slide_layouts[6])  # Blank
    third.shapes.add_picture(io.BytesIO(png(200, 150)), Inches(2), Inches(1), width=Inches(4))
    third.shapes.add_picture(io.BytesIO(png(40, 40)), Inches(8), Inches(1))
    third.shapes.add_textbox(Inches(2), Inches(5), Inches(4), Inches(0.5)).text_frame.text = "The claim flow."
    deck.save(str(path))
    return path


def plain_zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return path


def with_member(source: Path, path: Path, name: str, text: str) -> Path:
    """A copy of the Office file at `source` with the member `name` replaced by `text`."""
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(path, "w") as copy:
        for member in original.infolist():
            copy.writestr(member, text if member.filename == name else original.read(member))
    return path

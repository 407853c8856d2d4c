"""Small real files for the ingestion tests, made with PyMuPDF and Pillow."""

from __future__ import annotations

import functools
import io
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from knowledge.models import Collection, Document

POLICY = "公司的差旅报销政策规定，员工出差期间的住宿标准按城市等级执行，北京每晚不超过600元。"
"""A sentence of a travel policy, for documents that a search of 北京 住宿标准 finds."""

ZERO_PAGE_PDF = (
    b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n"
    b"2 0 obj\n<< /Type /Pages /Kids [] /Count 0 >>\nendobj\n"
    b"trailer\n<< /Root 1 0 R >>\n%%EOF\n"
)
"""A well-formed PDF whose page tree is empty."""

CJK_FONTS = [
    Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),
    Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"),
]


@functools.cache
def cjk_font() -> Path:
    """A font with Chinese glyphs: the system's (fonts-wqy-microhei), else the Droid Sans
    Fallback that PyMuPDF carries, written out once, so that no test needs a Debian font."""
    installed = next((font for font in CJK_FONTS if font.exists()), None)
    if installed is not None:
        return installed
    import pymupdf

    path = Path(tempfile.mkdtemp(prefix="cjk-font-")) / "droid-sans-fallback.ttf"
    path.write_bytes(pymupdf.Font("china-s").buffer)
    return path


def png(width: int, height: int, colour: tuple[int, int, int] = (40, 120, 200)) -> bytes:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (width, height), colour)
    ImageDraw.Draw(image).ellipse((width // 4, height // 4, width * 3 // 4, height * 3 // 4), fill=(250, 200, 0))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def handbook_pdf(path: Path) -> Path:
    """Page 1: heading, body, a 3×2 table, an image with a caption, a running footer.
    Page 2: a scanned-looking page (one full-page image, no text layer)."""
    import pymupdf

    font = cjk_font()
    document = pymupdf.open()
    page = document.new_page(width=595, height=842)
    fontname, fontfile = "cjk", str(font)

    def write(target: pymupdf.Page, at: tuple[float, float], text: str, size: float) -> None:
        target.insert_text(at, text, fontsize=size, fontname=fontname, fontfile=fontfile)

    write(page, (72, 90), "Travel policy 差旅政策", 22)
    write(page, (72, 130), "Employees are reimbursed for transport and hotels.", 11)
    write(page, (72, 146), "Hotels are capped by city tier, see the table.", 11)
    rows = [["City", "Cap"], ["Beijing", "600"], ["Chengdu", "400"]]
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            rect = pymupdf.Rect(72 + c * 120, 180 + r * 22, 192 + c * 120, 202 + r * 22)
            page.draw_rect(rect, color=(0, 0, 0), width=0.8)
            write(page, (rect.x0 + 5, rect.y1 - 7), cell, 10)
    page.insert_image(pymupdf.Rect(72, 300, 272, 420), stream=png(400, 240))
    write(page, (72, 438), "Figure 1: the reimbursement flow.", 10)
    write(page, (280, 820), "Company handbook - page 1", 8)
    scan = document.new_page(width=595, height=842)
    scan.insert_image(scan.rect, stream=png(600, 850, colour=(235, 235, 230)))
    document.save(path)
    return path


class Remembered:
    """The configured embedder, remembering each passage's vector for the whole session: the
    answering and search tests index the same few files again and again, whose vectors never change. Every row is
    still written by the real pipeline in each test; only the model's repeated work goes."""

    vectors: dict[tuple[str, str], list[float]] = {}

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    def __getattr__(self, name: str) -> Any:
        return getattr(self.embedder, name)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        model = self.embedder.model_id
        missing = [text for text in dict.fromkeys(texts) if (model, text) not in self.vectors]
        if missing:
            self.vectors.update(zip(((model, t) for t in missing), self.embedder.embed_documents(missing), strict=True))
        return [self.vectors[model, text] for text in texts]


def ingest(collection: Collection, name: str, data: bytes) -> Document:
    """`data` added to `collection` as `name` and indexed in this process by the real pipeline
    (the embedder's vectors remembered across tests: `Remembered`)."""
    from common.runs import claim
    from ingestion import actions
    from ingestion.models import IngestionRun
    from ingestion.pipeline import ingest_document
    from providers import registry

    document, run = actions.do_add_document(collection, name, data, enqueue=False)
    assert run is not None
    assert claim(run)
    ingest_document(run, Remembered(registry.text_embedder()))
    run.refresh_from_db()
    assert run.status == IngestionRun.Status.SUCCEEDED, run.error
    document.refresh_from_db()
    return document

"""Writes the bad-input corpus to tests/files/bad/ with its manifest cases.json (issue 10).

    .venv/bin/python scripts/make_bad_files.py [--out tests/files/bad]

Each case is one small file and one manifest entry: the file on disk, the name it is
uploaded under (names holding "/" or NUL cannot be file names, so the disk name is a safe
one), what it is, and what must happen to it:

- "refused": the upload answers this file with an error naming the problem; nothing stored;
- "failed": stored, and its ingestion run fails with a readable error;
- "ready": handled safely and indexed (hostile names, hostile text, odd encodings).

Big inputs stay small on disk: bombs are compressed zeros, the 10,000-page PDF shares one
empty content stream. A file over the upload limit is not here: tests make it from the
setting. tests/hardening/test_bad_input.py uploads every case; the fuzz tests start from them.
"""

from __future__ import annotations

import argparse
import io
import json
import struct
import sys
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.ingestion.files import handbook_pdf  # noqa: E402
from tests.ingestion.image_files import photo_jpeg  # noqa: E402
from tests.ingestion.media_files import make_audio_only, make_silent_video  # noqa: E402
from tests.ingestion.office_files import briefing_pptx, handbook_docx, with_member  # noqa: E402
from tests.ingestion.sheet_files import budget_xlsx, gbk_semicolon_csv  # noqa: E402

DEFAULT_OUT = ROOT / "tests" / "files" / "bad"
ZIP_DATE = (2024, 1, 1, 0, 0, 0)  # fixed member dates: the same corpus each time
MARKDOWN = b"# Title\n\nSome text about travel.\n"
XSS = "<img src=x onerror=alert(1)>"
Maker = Callable[[Path], bytes]


@dataclass(frozen=True)
class Case:
    file: str  # the name on disk
    case: str  # what it is, for people
    expect: str  # refused | failed | ready
    error_contains: str = ""  # for refused and failed: part of the message people see
    upload_name: str = ""  # the name it is uploaded under, when not `file`
    stored_name: str = ""  # for ready: the document's name after cleaning, when not the upload name


CASES: list[tuple[Case, Maker]] = []


def case(**fields: str) -> Callable[[Maker], Maker]:
    def add(make: Maker) -> Maker:
        CASES.append((Case(**fields), make))
        return make

    return add


def fixed_zip(members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(zipfile.ZipInfo(name, ZIP_DATE), data, compress_type=compression, compresslevel=9)
    return buffer.getvalue()


def office_bomb(valid: bytes, member: str) -> bytes:
    """A real Office file with a 100 MB member of zeros (about 100 KB stored)."""
    with zipfile.ZipFile(io.BytesIO(valid)) as original:
        members = {info.filename: original.read(info) for info in original.infolist()}
    members[member] = b"\0" * (100 * 1024 * 1024)
    return fixed_zip(members)


def without(valid: bytes, *dropped: str) -> bytes:
    with zipfile.ZipFile(io.BytesIO(valid)) as original:
        return fixed_zip({i.filename: original.read(i) for i in original.infolist() if i.filename not in dropped})


# --- empty and not text ----------------------------------------------------------------


@case(file="empty.txt", case="empty file", expect="refused", error_contains="The file is empty")
def _empty(tmp: Path) -> bytes:
    return b""


@case(file="whitespace.md", case="only spaces and newlines", expect="refused", error_contains="The file is empty")
def _whitespace(tmp: Path) -> bytes:
    return b" \n\t\n   \r\n\n"


@case(file="binary.txt", case="binary file named .txt", expect="refused", error_contains="cannot be indexed")
def _binary(tmp: Path) -> bytes:
    return bytes(range(256)) * 16


@case(file="unknown.7z", case="unknown type (a 7-Zip header)", expect="refused", error_contains="cannot be indexed")
def _seven_zip(tmp: Path) -> bytes:
    return b"7z\xbc\xaf\x27\x1c\x00\x04" + bytes(range(200)) * 4


@case(file="controls.txt", case="text full of control characters", expect="refused", error_contains="cannot be indexed")
def _controls(tmp: Path) -> bytes:
    return b"".join(b"line %d \x1b[31m\x07\x08\x0e\n" % n for n in range(50))


@case(
    file="utf16_no_bom.txt",
    case="UTF-16 text without a byte-order mark (NUL bytes)",
    expect="refused",
    error_contains="cannot be indexed",
)
def _utf16(tmp: Path) -> bytes:
    return "Travel policy 差旅政策\n".encode("utf-16-le") * 20


@case(
    file="utf16_cut.txt",
    case="UTF-16 text with a byte-order mark, cut in the middle of a character",
    expect="refused",
    error_contains="cannot be decoded",
)
def _utf16_cut(tmp: Path) -> bytes:
    return "Travel policy 差旅政策\n".encode("utf-16") * 3 + b"\x41"


@case(file="nul_late.txt", case="text with NUL bytes after the first 4 KB", expect="ready", stored_name="nul_late.txt")
def _nul_late(tmp: Path) -> bytes:
    return b"Plain words about hotels.\n" * 200 + b"after the gap\x00\x00 more words\n"


# --- encodings ---------------------------------------------------------------------------


@case(file="gbk.txt", case="Chinese text in GBK", expect="ready")
def _gbk(tmp: Path) -> bytes:
    return "差旅政策\n\n员工出差住宿标准：一线城市每晚六百元。\n".encode("gbk")


@case(file="gb18030_rare.md", case="GB18030 with four-byte characters", expect="ready")
def _gb18030(tmp: Path) -> bytes:
    return "# 标题\n\n生僻字 𠀀𠀁 与 emoji 😀 在 GB18030 中是四字节。\n".encode("gb18030")


@case(file="long_line.txt", case="40 KB on one line with no separators", expect="ready")
def _long_line(tmp: Path) -> bytes:
    return b"x" * 40_000


# --- names -------------------------------------------------------------------------------


@case(
    file="dotdot.md",
    upload_name="../../etc/passwd.md",
    case="name with ../",
    expect="ready",
    stored_name="passwd.md",
)
def _dotdot(tmp: Path) -> bytes:
    return MARKDOWN


@case(
    file="control_name.md",
    upload_name="bad\x1bna\x07me\x7f.md",
    case="name with control characters",
    expect="ready",
    stored_name="badname.md",
)
def _control_name(tmp: Path) -> bytes:
    return MARKDOWN


@case(
    file="long_name.md",
    upload_name="报告" * 150 + ".md",
    case="name of 303 characters",
    expect="ready",
    stored_name="报告" * 98 + "报.md",
)
def _long_name(tmp: Path) -> bytes:
    return MARKDOWN


@case(
    file="rtl_name.md",
    upload_name="تقرير\u202edm.exe.md",
    case="Arabic name with a right-to-left override",
    expect="refused",
    error_contains="change the direction of the text (U+202E)",
)
def _rtl_name(tmp: Path) -> bytes:
    return "# تقرير\n\nنص عربي عن السفر.\n".encode()


@case(file="emoji_name.md", upload_name="📄 报告 🚀.md", case="emoji name", expect="ready")
def _emoji_name(tmp: Path) -> bytes:
    return "# Emoji 🚀\n\nText 😀 with emoji.\n".encode()


@case(file="xss_name.md", upload_name=f"{XSS}.md", case="XSS in the file name", expect="ready")
def _xss_name(tmp: Path) -> bytes:
    return MARKDOWN


@case(
    file="nul_name.md",
    upload_name="nul\x00name.md",
    case="NUL in the file name",
    expect="ready",
    stored_name="nulname.md",
)
def _nul_name(tmp: Path) -> bytes:
    return MARKDOWN


@case(file="xss_text.md", case="XSS in the document text", expect="ready")
def _xss_text(tmp: Path) -> bytes:
    text = f"# Heading {XSS}\n\n<script>alert('text')</script> and {XSS} in a paragraph.\n"
    return text.encode()


# --- PDF ---------------------------------------------------------------------------------


@case(file="truncated.pdf", case="truncated PDF", expect="failed", error_contains="PDF")
def _truncated_pdf(tmp: Path) -> bytes:
    return handbook_pdf(tmp / "h.pdf").read_bytes()[:300]


@case(file="corrupt.pdf", case="PDF header then garbage", expect="failed", error_contains="PDF")
def _corrupt_pdf(tmp: Path) -> bytes:
    return b"%PDF-1.7\n" + bytes(range(256)) * 8


@case(file="encrypted.pdf", case="password-protected PDF", expect="failed", error_contains="password-protected")
def _encrypted_pdf(tmp: Path) -> bytes:
    import pymupdf

    with small_pdf("A secret travel policy.") as document:
        aes = pymupdf.PDF_ENCRYPT_AES_256  # type: ignore[attr-defined]
        return bytes(document.tobytes(encryption=aes, user_pw="secret", owner_pw="owner"))


@case(file="zero_pages.pdf", case="PDF with 0 pages", expect="failed", error_contains="no pages")
def _zero_pages(tmp: Path) -> bytes:
    return pdf_of([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"])


@case(file="pages_10000.pdf", case="PDF with 10,000 tiny pages", expect="failed", error_contains="PORTAL_MAX_PAGES")
def _many_pages(tmp: Path) -> bytes:
    pages = 10_000
    kids = b" ".join(b"%d 0 R" % (3 + n) for n in range(pages))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % pages]
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 10 10] >>"] * pages
    return pdf_of(objects, compress=True)


@case(
    file="pdf_named.txt",
    case="a real PDF named .txt (wrong extension)",
    expect="refused",
    error_contains="is named .txt but holds a PDF document",
)
def _pdf_as_txt(tmp: Path) -> bytes:
    with small_pdf("A PDF under a text name, about travel.") as document:
        return bytes(document.tobytes())


def small_pdf(text: str) -> Any:
    """One page of `text` in a built-in font (no embedded font: a few hundred bytes)."""
    import pymupdf

    document = pymupdf.open()
    document.new_page().insert_text((72, 72), text, fontsize=12)
    return document


def pdf_of(objects: list[bytes], compress: bool = False) -> bytes:
    """A PDF of these objects (numbered from 1); `compress` packs them in one object stream
    so that thousands of objects take a few kilobytes."""
    if not compress:
        out = bytearray(b"%PDF-1.7\n")
        offsets = []
        for number, body in enumerate(objects, start=1):
            offsets.append(len(out))
            out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
        xref = len(out)
        out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
        out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
        out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
        return bytes(out)
    return _object_stream_pdf(objects)


def _object_stream_pdf(objects: list[bytes]) -> bytes:
    header, bodies, position = [], [], 0
    for number, body in enumerate(objects, start=1):
        header.append(b"%d %d" % (number, position))
        bodies.append(body)
        position += len(body) + 1
    head = b" ".join(header) + b"\n"
    packed = zlib.compress(head + b"\n".join(bodies) + b"\n", 9)
    stream_number = len(objects) + 1
    xref_number = stream_number + 1
    out = bytearray(b"%PDF-1.7\n")
    stream_offset = len(out)
    out += b"%d 0 obj\n<< /Type /ObjStm /N %d /First %d /Filter /FlateDecode /Length %d >>\nstream\n" % (
        stream_number,
        len(objects),
        len(head),
        len(packed),
    )
    out += packed + b"\nendstream\nendobj\n"
    rows = [struct.pack(">BIH", 0, 0, 65535)]
    rows += [struct.pack(">BIH", 2, stream_number, index) for index in range(len(objects))]
    rows.append(struct.pack(">BIH", 1, stream_offset, 0))
    xref_offset = len(out)
    rows.append(struct.pack(">BIH", 1, xref_offset, 0))
    table = zlib.compress(b"".join(rows), 9)
    out += b"%d 0 obj\n<< /Type /XRef /Size %d /W [1 4 2] /Root 1 0 R /Filter /FlateDecode /Length %d >>\n" % (
        xref_number,
        xref_number + 1,
        len(table),
    )
    out += b"stream\n" + table + b"\nendstream\nendobj\nstartxref\n%d\n%%%%EOF\n" % xref_offset
    return bytes(out)


# --- Office ------------------------------------------------------------------------------


@case(file="bomb.docx", case="DOCX zip bomb", expect="failed", error_contains="zip bomb")
def _docx_bomb(tmp: Path) -> bytes:
    return office_bomb(handbook_docx(tmp / "h.docx").read_bytes(), "word/media/zeros.bin")


@case(file="bomb.pptx", case="PPTX zip bomb", expect="failed", error_contains="zip bomb")
def _pptx_bomb(tmp: Path) -> bytes:
    return office_bomb(briefing_pptx(tmp / "b.pptx").read_bytes(), "ppt/media/zeros.bin")


@case(file="bomb.xlsx", case="XLSX zip bomb", expect="failed", error_contains="zip bomb")
def _xlsx_bomb(tmp: Path) -> bytes:
    return office_bomb(budget_xlsx(tmp / "b.xlsx").read_bytes(), "xl/media/zeros.bin")


@case(
    file="not_a_zip.docx",
    case="DOCX that is not a zip",
    expect="refused",
    error_contains="is named .docx but holds data of a type the portal does not know",
)
def _not_zip(tmp: Path) -> bytes:
    return b"This is not a Word document at all.\x00\x01\x02" * 10


@case(file="broken_zip.xlsx", case="XLSX cut short (zip without its directory)", expect="refused",
      error_contains="damaged or incomplete Office document")  # fmt: skip
def _broken_zip(tmp: Path) -> bytes:
    return budget_xlsx(tmp / "b.xlsx").read_bytes()[:400]


@case(
    file="missing_part.docx",
    case="DOCX without [Content_Types].xml",
    expect="failed",
    error_contains="[Content_Types].xml is missing",
)
def _docx_missing(tmp: Path) -> bytes:
    return without(handbook_docx(tmp / "h.docx").read_bytes(), "[Content_Types].xml")


@case(
    file="missing_part.pptx",
    case="PPTX without [Content_Types].xml",
    expect="failed",
    error_contains="[Content_Types].xml is missing",
)
def _pptx_missing(tmp: Path) -> bytes:
    return without(briefing_pptx(tmp / "b.pptx").read_bytes(), "[Content_Types].xml")


@case(file="missing_sheet.xlsx", case="XLSX whose worksheet part is missing", expect="failed",
      error_contains="is missing")  # fmt: skip
def _xlsx_missing(tmp: Path) -> bytes:
    return without(budget_xlsx(tmp / "b.xlsx").read_bytes(), "xl/worksheets/sheet1.xml")


@case(file="bad_xml.docx", case="DOCX whose document.xml is not XML", expect="failed", error_contains="Word document")
def _docx_bad_xml(tmp: Path) -> bytes:
    source = handbook_docx(tmp / "h.docx")
    return with_member(source, tmp / "bad.docx", "word/document.xml", "<w:document><w:body><w:p>").read_bytes()


# --- images ------------------------------------------------------------------------------


@case(
    file="bomb.png",
    case="PNG decompression bomb (20,000 × 20,000 pixels)",
    expect="failed",
    error_contains="400.0 megapixels, more than the 100 megapixels allowed (PORTAL_MAX_IMAGE_MEGAPIXELS)",
)
def _png_bomb(tmp: Path) -> bytes:
    side = 20_000
    row = b"\0" * (1 + side // 8)  # filter byte + one bit a pixel
    packer = zlib.compressobj(9)
    data = b"".join(packer.compress(row) for _ in range(side)) + packer.flush()
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)  # 1-bit greyscale
    return b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", data) + _png_chunk(b"IEND", b"")


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


@case(file="truncated.jpg", case="truncated JPEG", expect="failed", error_contains="damaged or incomplete")
def _truncated_jpeg(tmp: Path) -> bytes:
    data = photo_jpeg()
    return data[: len(data) // 2]


@case(file="garbage.png", case="PNG signature then garbage", expect="failed", error_contains="image cannot be read")
def _garbage_png(tmp: Path) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


# --- video -------------------------------------------------------------------------------


@case(file="audio_only.mp4", case="video with no video stream", expect="failed", error_contains="no video picture")
def _audio_only(tmp: Path) -> bytes:
    return make_audio_only(tmp / "a.m4a", seconds=1.0).read_bytes()


@case(file="silent.mp4", case="video with no audio", expect="ready")
def _silent(tmp: Path) -> bytes:
    return make_silent_video(tmp / "s.mp4", seconds=2.0).read_bytes()


@case(file="truncated.mp4", case="video cut in half", expect="failed", error_contains="video")
def _truncated_video(tmp: Path) -> bytes:
    data = make_silent_video(tmp / "t.mp4", seconds=2.0).read_bytes()
    return data[: len(data) // 2]


@case(file="fake.mp4", case="MP4 header then garbage", expect="failed", error_contains="video")
def _fake_video(tmp: Path) -> bytes:
    return b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom" + bytes(range(256)) * 8


# --- CSV ---------------------------------------------------------------------------------


@case(file="gbk_mixed.csv", case="GBK CSV with mixed delimiters", expect="failed", error_contains="mixes delimiters")
def _gbk_mixed(tmp: Path) -> bytes:
    text = "项目,城市,金额\n差旅,北京,100\n培训,上海,200\n办公;成都;300\n会议;武汉;400\n"
    return text.encode("gbk")


@case(file="gbk_semicolon.csv", case="GBK CSV with semicolons and decimal commas", expect="ready")
def _gbk_semicolon(tmp: Path) -> bytes:
    return gbk_semicolon_csv(tmp / "g.csv").read_bytes()


@case(file="ragged.csv", case="CSV whose rows never agree on columns", expect="failed",
      error_contains="no consistent columns")  # fmt: skip
def _ragged(tmp: Path) -> bytes:
    return b"a,b\nc,d,e\nf,g,h,i\nj\nk,l,m,n,o\nq,r,s,t,u,v\n"


@case(file="open_quote.csv", case="CSV with an unterminated quote", expect="ready")
def _open_quote(tmp: Path) -> bytes:
    return b'name,city\nAlice,Beijing\nBob,"Shanghai\nCarol,Chengdu\n'


def generate(out: Path) -> list[Case]:
    import tempfile

    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():
        if old.is_file():
            old.unlink()
    cases = []
    with tempfile.TemporaryDirectory() as folder:
        for index, (entry, make) in enumerate(CASES):
            work = Path(folder) / str(index)
            work.mkdir()
            (out / entry.file).write_bytes(make(work))
            cases.append(entry)
    manifest = [{key: value for key, value in asdict(entry).items() if value} for entry in cases]
    (out / "cases.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    cases = generate(args.out)
    total = sum(path.stat().st_size for path in args.out.iterdir())
    print(f"{len(cases)} cases, {total / 1024:.0f} KB in {args.out}")


if __name__ == "__main__":
    main()

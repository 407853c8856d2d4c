"""Small real files for the answering tests: a three-page bilingual policy PDF (each fact on
its own page, so a citation's page can be checked) and two product sheets in Markdown (a
comparison must read both)."""

from __future__ import annotations

from functools import cache

from tests.ingestion.files import cjk_font, ingest

PAGES = [
    ("Welcome 欢迎", ["云帆科技员工手册。", "This handbook describes the company's policies."]),
    (
        "Annual leave 年假",
        [
            "入职满一年的员工每年享有十天带薪年假。",
            "未休完的年假可以累积到下一年，最多累积五天。",
            "Employees get ten days of paid annual leave per year.",
        ],
    ),
    (
        "Expenses 报销",
        [
            "报销单须在出差结束后三十天内提交。",
            "Expense claims must be filed within thirty days of the trip.",
        ],
    ),
]

PRODUCTS = {
    "falcon.md": "# Falcon 路由器\n\nFalcon 路由器的保修期为两年。\n\nFalcon 支持 Wi-Fi 6。\n",
    "heron.md": "# Heron 交换机\n\nHeron 交换机的保修期为五年。\n\nHeron 有 48 个端口。\n",
}


def files() -> dict[str, bytes]:
    """All of them, by name, as uploaded."""
    return {"policy.pdf": policy_pdf(), **{name: text.encode() for name, text in PRODUCTS.items()}}


def ingest_files(collection, files: dict[str, bytes]) -> None:
    """Upload and index here (no Celery worker needed)."""
    for name, data in files.items():
        ingest(collection, name, data)


@cache
def policy_pdf() -> bytes:
    """The policy PDF, made once: its CJK font's glyph widths take a quarter of a second."""
    import pymupdf

    font = cjk_font()
    fontname, fontfile = "cjk", str(font)
    document = pymupdf.open()
    for title, lines in PAGES:
        page = document.new_page(width=595, height=842)
        page.insert_text((72, 90), title, fontsize=20, fontname=fontname, fontfile=fontfile)
        for number, line in enumerate(lines):
            page.insert_text((72, 140 + number * 24), line, fontsize=12, fontname=fontname, fontfile=fontfile)
    data: bytes = document.tobytes()
    return data

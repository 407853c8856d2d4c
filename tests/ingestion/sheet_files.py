"""Small real spreadsheets for the ingestion tests, made with openpyxl and the csv module."""

from __future__ import annotations

import re
import zipfile
from datetime import date, datetime
from pathlib import Path

BUDGET_HEADER = ("项目", "日期", "金额", "数量", "占比", "合计", "备注")


def budget_xlsx(path: Path) -> Path:
    """Sheet 预算: Chinese headers, dates, floats, a percentage, formulas with the values Excel
    caches for them, a cell with a pipe and a line break, trailing blank cells and rows.
    Sheet Notes: one column with a gap. Sheet Empty: nothing but a formatted blank cell."""
    from openpyxl import Workbook

    workbook = Workbook()
    budget = workbook.active
    budget.title = "预算"
    budget.append(BUDGET_HEADER)
    budget.append(("差旅", date(2024, 3, 1), 1234.5, 3.0, 0.15, "=C2*D2", "北京|上海\n往返"))
    budget.append(("培训", datetime(2024, 3, 2, 14, 30), 0.1 + 0.2, 2, 0.5, "=C3*D3", None))
    for row in (2, 3):
        budget.cell(row=row, column=5).number_format = "0%"
    budget["J2"] = "   "  # blank but present: trimmed
    budget.cell(row=9, column=12).number_format = "0.00"  # a formatted blank cell far out: trimmed
    notes = workbook.create_sheet("Notes")
    notes.append(("Note",))
    notes.append(("Receipts are kept for 5 years.",))
    notes.append(())
    notes.append(("Ask finance about exceptions.",))
    empty = workbook.create_sheet("Empty")
    empty["B2"].number_format = "0.00"
    workbook.save(path)
    # openpyxl stores formulas without results; Excel stores both. Add what Excel would have.
    return with_cached_values(path, "xl/worksheets/sheet1.xml", {"F2": "3703.5", "F3": "0.60000000000000009"})


def with_cached_values(path: Path, member: str, values: dict[str, str]) -> Path:
    """Write cached results into formula cells, as Excel does when it saves a workbook."""
    with zipfile.ZipFile(path) as archive:
        parts = {info.filename: archive.read(info) for info in archive.infolist()}
    xml = parts[member].decode()
    for ref, value in values.items():
        xml, found = re.subn(rf'(<c r="{ref}"[^>]*>\s*<f>[^<]*</f>)\s*(<v\s*/>|<v>\s*</v>)?', rf"\1<v>{value}</v>", xml)
        assert found == 1, f"no formula cell {ref} in {member}"
    parts[member] = xml.encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return path


def long_xlsx(path: Path, rows: int = 450, title: str = "明细") -> Path:
    """One sheet: a header and `rows` data rows numbered 1…rows in the first column."""
    from openpyxl import Workbook

    workbook = Workbook()
    sheet = workbook.active
    sheet.title = title
    sheet.append(("编号", "城市", "说明"))
    for number in range(1, rows + 1):
        sheet.append((number, f"城市{number}", f"第{number}行的说明文字，用于测试长表格的分页。"))
    workbook.save(path)
    return path


def empty_xlsx(path: Path) -> Path:
    from openpyxl import Workbook

    workbook = Workbook()
    workbook.active.title = "Blank"
    workbook.create_sheet("Also blank")
    workbook.save(path)
    return path


def gbk_semicolon_csv(path: Path) -> Path:
    """What Excel on a Chinese Windows with a European list separator writes: GBK and `;`,
    with decimal commas that must stay inside their values."""
    text = "项目;金额;备注\n差旅;1234,5;北京出差\n培训;800;内部培训\n办公用品;56,25;笔、纸\n"
    path.write_bytes(text.encode("gbk"))
    return path


def mixed_rows_csv(path: Path) -> Path:
    """Two exports pasted together: the first rows use commas, the rest semicolons."""
    path.write_text("name,city,amount\nAlice,Beijing,100\nBob,Shanghai,200\nCarol;Chengdu;300\nDave;Wuhan;400\n")
    return path


def mixed_cells_csv(path: Path) -> Path:
    """Commas and semicolons on every line, each line with one of each."""
    path.write_text("name,city;amount\nAlice;Beijing,100\nBob,Shanghai;200\nCarol;Chengdu,300\n")
    return path


def long_csv(path: Path, rows: int = 450) -> Path:
    lines = ["id,city"] + [f"{number},城市{number}" for number in range(1, rows + 1)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path

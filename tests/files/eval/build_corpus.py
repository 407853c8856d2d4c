"""A small bilingual corpus of real files for the retrieval evaluation (questions.jsonl).

    .venv/bin/python tests/files/eval/build_corpus.py <folder>    # writes the files there

Thirteen files of a fictional company (云帆科技, Yunfan) on distinct topics, so that each
question in questions.jsonl has one right page: multi-page PDFs (travel reimbursement, leave
policy, IT security, onboarding), Markdown in English and Chinese, a Word handbook, an XLSX
with two sheets, a CSV, two pictures read by OCR and two PDFs with scanned pages.

Facts that look alike sit on different pages on purpose: the 7th (考勤) and the 14th (工资)
of the month, the 7 March and 14 March meetings, so that a retriever that ignores numbers
shows it. Each fact is written on one line of its own: PDF text extraction joins wrapped
lines with a newline, which would break the literal answers the gold check looks for.

Everything is fixed (no randomness, fixed document dates), so the same files come out each
time and questions.jsonl's page numbers stay right. When you change a file here, run
tests/assistant/test_evaluate.py: its gold check ingests the corpus and reads each gold page.
"""

from __future__ import annotations

import csv
import io
import re
import sys
import zipfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # run as a script: tests.ingestion must be importable
    sys.path.insert(0, str(ROOT))

from tests.ingestion.files import cjk_font, png  # noqa: E402
from tests.ingestion.image_files import text_image  # noqa: E402

FIXED_DATE = datetime(2024, 3, 1, 9, 0, 0)
PDF_DATE = "D:20240301090000+08'00'"
WIDTH, HEIGHT, MARGIN = 595.0, 842.0, 72.0
BODY, HEADING, LEADING = 11.0, 18.0, 20.0


@dataclass(frozen=True)
class Item:
    """One thing on a PDF page, laid out top to bottom."""

    kind: Literal["heading", "line", "table", "figure", "scan"]
    text: str = ""
    rows: tuple[tuple[str, ...], ...] = ()
    lines: tuple[str, ...] = ()  # a figure's or scan's picture text; a figure without any is a plain picture


def heading(text: str) -> Item:
    return Item("heading", text)


def line(text: str) -> Item:
    return Item("line", text)


def table(*rows: tuple[str, ...]) -> Item:
    return Item("table", rows=rows)


def figure(caption: str) -> Item:
    return Item("figure", caption)


def scan(*lines: str) -> Item:
    """A whole page that is only a picture of these lines: no text layer, read by OCR."""
    return Item("scan", lines=lines)


TRAVEL = [
    [
        heading("差旅报销制度 Travel reimbursement"),
        line("本制度适用于全体员工因公出差产生的交通、住宿和餐饮费用。"),
        line("出差前须在OA系统提交出差申请，经部门经理批准后方可预订。"),
        line("交通：乘坐高铁一律为二等座，不得乘坐一等座或商务座。"),
        line("Domestic flights are economy class; business class needs VP approval."),
        line("市内出租车费用凭发票实报实销；晚上22点以后加班可打车回家。"),
    ],
    [
        heading("住宿与餐补标准 Hotel caps"),
        line("住宿费按城市等级设上限，餐补按天发放，标准如下表："),
        table(
            ("城市 City", "住宿上限/晚", "餐补/天"),
            ("北京 Beijing", "600", "120"),
            ("上海 Shanghai", "650", "120"),
            ("深圳 Shenzhen", "550", "100"),
            ("成都 Chengdu", "400", "80"),
            ("其他城市 Other", "300", "80"),
        ),
        line("超出标准的部分由员工自行承担。"),
        line("Hotel caps are per night and include breakfast."),
    ],
    [
        heading("报销流程 Claim process"),
        line("出差结束后30天内在财务系统提交报销单，逾期不予受理。"),
        line("发票抬头须为“云帆科技有限公司”，税号91310000MA1FL8XQ2K。"),
        line("财务每周二、周四审核报销单，通过后5个工作日内打款到工资卡。"),
        line("Claims above 5,000 yuan need a second approval by the finance director."),
    ],
]

LEAVE = [
    [
        heading("请假制度 第一章 年假"),
        line("员工入职满一年后享有带薪年假。"),
        line("累计工作满1年不满10年的，年假5天。"),
        line("累计工作满10年不满20年的，年假10天。"),
        line("累计工作满20年的，年假15天。"),
        line("当年未休完的年假可顺延至次年3月31日，逾期作废。"),
    ],
    [
        heading("第二章 病假、事假与考勤"),
        line("病假须提供二级以上医院的诊断证明。"),
        line("病假期间工资按基本工资的80%发放。"),
        line("事假须提前3个工作日在OA系统中申请，每次不超过5天。"),
        line("每月7号前，部门助理须提交上月的考勤确认表。"),
    ],
    [
        heading("第三章 工资发放与其他假期"),
        line("工资于每月14号发放，遇节假日提前至最近的工作日。"),
        line("婚假10天，产假158天，陪产假15天。"),
        line("请假3天以内由直属经理审批，3天以上须经部门总监审批。"),
    ],
]

SECURITY = [
    [
        heading("IT Security Policy: passwords and accounts"),
        line("Passwords must be at least 12 characters long and mix letters, digits and symbols."),
        line("Passwords expire every 90 days; the last 5 passwords cannot be reused."),
        line("Accounts lock for 30 minutes after 6 failed sign-in attempts."),
        line("Multi-factor authentication is mandatory for email and the VPN."),
    ],
    [
        heading("Devices and remote access"),
        line("Company laptops use full-disk encryption (BitLocker or FileVault)."),
        line("Report a lost or stolen device to security@yunfan.example within 2 hours."),
        line("Reach internal systems from home only through the GlobalConnect VPN."),
        line("USB storage devices are blocked on all company laptops."),
    ],
    [
        heading("Incidents and phishing"),
        line("Forward suspicious emails to phishing@yunfan.example and do not click their links."),
        line("The security hotline, extension 7700, is staffed 24 hours a day."),
        line("Security awareness training is required once a year, by 30 November."),
    ],
]

ONBOARDING = [
    [
        heading("新员工入职指南 Onboarding: day one"),
        line("First day: arrive at 9:30 and collect your badge at the front desk, building B, 3rd floor."),
        line("领取笔记本电脑：IT服务台位于A座2楼，工作日9:00-18:00。"),
        line("Your manager assigns a buddy who answers questions during the first month."),
        figure("图1：园区平面图，停车场在C座地下二层。"),
    ],
    [
        heading("第一周 First week"),
        line("第一周须完成信息安全、反腐败和产品基础三门在线课程。"),
        line("试用期为3个月，试用期满前两周由经理进行转正评估。"),
        line("Lunch is subsidised: the canteen on floor 1 charges staff 15 yuan a meal."),
    ],
]

EQUIPMENT_LOAN = [
    [
        heading("设备借用说明 Equipment loans"),
        line("Projectors, cameras and spare monitors can be borrowed from the IT desk."),
        line("借用前请在IT服务台填写设备借用登记表（见下页扫描件）。"),
    ],
    [
        scan(
            "设备借用登记表 Equipment loan form",
            "借用期限最长14天",
            "逾期未还将通知部门经理",
            "Return items to the IT desk, building A",
        )
    ],
]

VISITOR_RULES = [
    [
        scan(
            "Visitor rules",
            "Register visitors one day in advance",
            "Escort visitors at all times",
            "Photography is not allowed in the lab",
        )
    ]
]

PRODUCT_FAQ = """\
Nimbus Drive is the team file service run by the platform group. This FAQ answers the questions
the help desk hears most often.

# Plans and pricing

The Basic plan costs 49 yuan per user per month and the Pro plan 199 yuan per user per month.
Paying for a year in advance gets two months free.

# Storage limits

Basic users get 10 GB each and Pro users 100 GB each. A single file can be at most 5 GB.
Version history is kept for 180 days on Pro and 30 days on Basic.

# Sharing links

Shared links expire after 7 days by default; the owner can extend them to at most 90 days.
Links can be protected by a password.

## External partners

Sharing with external domains needs the approval of the data owner and is logged for audits.

# Deleted files

Deleted files stay in the recycle bin for 30 days. After that an administrator can still
restore them for 14 more days through a support ticket; then they are gone for good.

# Support

The help desk answers Monday to Friday, 8:00 to 20:00. For a P1 incident the first response
comes within 15 minutes, around the clock. Write to support@nimbus.example.
"""

MEETING_MINUTES = """\
# 产品周会纪要

记录人：王芳。参会人：张伟、李娜、王芳、陈强。

## 2024年3月7日 周会

- 张伟汇报：移动端2.3版本推迟发布，原因是支付模块的安全测试未通过。
- 李娜负责联系第三方安全公司复测，预算不超过3万元。
- 决定：暂停新功能开发一周，全力修复缺陷。

## 2024年3月14日 周会

- 安全复测已通过，2.3版本确认于3月20日上线。
- 陈强提出客服工单量比上月增加40%，决定增加两名客服外包。
- 决定：下次周会改到3月22日（周五）下午3点，在5楼猎户座会议室。

## 行动项

- 王芳：3月18日前整理发布说明。
- 陈强：3月15日前提交客服外包预算。
"""

EQUIPMENT_PRICES: tuple[tuple[str | int, ...], ...] = (
    ("品名", "型号", "单价(元)", "每人上限"),
    ("笔记本电脑", "ThinkPad X1 Carbon", 12999, 1),
    ("显示器", "Dell U2723QE", 3299, 2),
    ("机械键盘", "Keychron K8", 499, 1),
    ("人体工学椅", "Herman Miller Sayl", 6899, 1),
    ("降噪耳机", "Sony WH-1000XM5", 2499, 1),
)
CLOUD_QUOTAS: tuple[tuple[str | int, ...], ...] = (
    ("Department", "GPU hours per month", "Storage (TB)", "Monthly budget (yuan)"),
    ("Research", 5000, 200, 350000),
    ("Data platform", 1200, 500, 180000),
    ("Mobile", 300, 20, 40000),
    ("Marketing", 0, 5, 8000),
)
ROOMS = (
    ("room", "floor", "seats", "equipment"),
    ("Orion 猎户座", "5F", "12", "projector, whiteboard"),
    ("Lyra 天琴座", "5F", "6", "TV screen"),
    ("Vega 织女星", "3F", "20", "video conference system"),
    ("Draco 天龙座", "2F", "4", "phone booth"),
)


def build_corpus(folder: Path) -> list[Path]:
    """Write every corpus file into `folder` (created if needed); their paths, in name order."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [
        write_pdf(folder / "travel_reimbursement.pdf", TRAVEL),
        write_pdf(folder / "leave_policy.pdf", LEAVE),
        write_pdf(folder / "it_security.pdf", SECURITY),
        write_pdf(folder / "onboarding_guide.pdf", ONBOARDING),
        write_pdf(folder / "equipment_loan_scan.pdf", EQUIPMENT_LOAN),
        write_pdf(folder / "visitor_rules_scan.pdf", VISITOR_RULES),
        write_text(folder / "product_faq.md", PRODUCT_FAQ),
        write_text(folder / "meeting_minutes_zh.md", MEETING_MINUTES),
        team_handbook_docx(folder / "team_handbook.docx"),
        price_list_xlsx(folder / "price_list.xlsx"),
        conference_rooms_csv(folder / "conference_rooms.csv"),
        write_bytes(
            folder / "wifi_notice.png",
            text_image(
                [
                    "访客无线网络 Guest WiFi",
                    "网络名称 YUNFAN-GUEST",
                    "密码每周一更换，请到前台索取",
                    "Printers on 3F and 5F",
                ]
            ),
        ),
        write_bytes(
            folder / "expense_flow.png",
            text_image(
                ["报销审批流程", "第一步 员工提交报销单", "第二步 部门经理审批", "第三步 财务复核", "第四步 出纳打款"]
            ),
        ),
    ]
    return sorted(paths)


def write_text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def write_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def write_pdf(path: Path, pages: list[list[Item]]) -> Path:
    """A PDF with one physical page per entry of `pages`, with a running footer the parser drops."""
    import pymupdf

    document = pymupdf.open()
    for number, items in enumerate(pages, start=1):
        page = document.new_page(width=WIDTH, height=HEIGHT)
        _layout(page, items)
        if not any(item.kind == "scan" for item in items):
            _write(page, (WIDTH - 200, HEIGHT - 20), f"Yunfan internal - page {number}", 8)
    document.set_metadata({"creationDate": PDF_DATE, "modDate": PDF_DATE, "producer": "build_corpus"})
    document.subset_fonts()  # else each page carries the whole 5 MB CJK font
    document.save(path, garbage=4, deflate=True, no_new_id=True)
    document.close()
    return path


def _layout(page: object, items: list[Item]) -> None:
    import pymupdf

    assert isinstance(page, pymupdf.Page)
    y = MARGIN + 20
    for item in items:
        if item.kind == "heading":
            _write(page, (MARGIN, y), item.text, HEADING)
            y += LEADING * 2
        elif item.kind == "line":
            _write(page, (MARGIN, y), item.text, BODY)
            y += LEADING
        elif item.kind == "table":
            y = _table(page, item.rows, y) + LEADING
        elif item.kind == "figure":
            page.insert_image(pymupdf.Rect(MARGIN, y, MARGIN + 220, y + 130), stream=png(440, 260, (90, 150, 90)))
            _write(page, (MARGIN, y + 148), item.text, BODY - 1)
            y += 148 + LEADING
        else:
            picture = text_image(list(item.lines), width=1240, size=44)
            height = 515 * _aspect(picture)
            page.insert_image(pymupdf.Rect(40, 60, 555, 60 + height), stream=picture)


def _table(page: object, rows: tuple[tuple[str, ...], ...], top: float) -> float:
    """A ruled table (the parser finds tables by their lines); the y below it."""
    import pymupdf

    assert isinstance(page, pymupdf.Page)
    width, height = 140.0, 22.0
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            rect = pymupdf.Rect(MARGIN + c * width, top + r * height, MARGIN + (c + 1) * width, top + (r + 1) * height)
            page.draw_rect(rect, color=(0, 0, 0), width=0.8)
            _write(page, (rect.x0 + 5, rect.y1 - 7), cell, BODY - 1)
    return top + len(rows) * height


def _write(page: object, at: tuple[float, float], text: str, size: float) -> None:
    """One line of text in the CJK font; refuses a line that would run off the page."""
    import pymupdf

    assert isinstance(page, pymupdf.Page)
    font = cjk_font()
    length = pymupdf.Font(fontfile=str(font)).text_length(text, fontsize=size)
    if at[0] + length > WIDTH - MARGIN / 2:
        raise ValueError(f"line too long for one PDF line ({length:.0f} pt): {text}")
    page.insert_text(at, text, fontsize=size, fontname="cjk", fontfile=str(font))


def _aspect(picture: bytes) -> float:
    from PIL import Image

    with Image.open(io.BytesIO(picture)) as image:
        return image.height / image.width


def team_handbook_docx(path: Path) -> Path:
    """Sections, as the portal numbers them: 1 the title with its intro, 2 on-call, 3 code
    review, 4 releases (with a table), 5 rollback (a Heading 2 under releases)."""
    from docx import Document

    document = Document()
    document.core_properties.created = FIXED_DATE
    document.core_properties.modified = FIXED_DATE
    document.add_heading("Engineering team handbook 研发团队手册", level=0)
    document.add_paragraph("How the engineering team works: on-call, reviews and releases.")
    document.add_heading("On-call rotation 值班制度", level=1)
    document.add_paragraph("值班每周一上午10点轮换。")
    document.add_paragraph("值班补贴每天200元，法定节假日加倍。")
    document.add_paragraph("Pages must be acknowledged within 10 minutes, day or night.")
    document.add_heading("Code review 代码评审", level=1)
    document.add_paragraph("Every merge request needs two approvals, one of them from a code owner.")
    document.add_paragraph("Reviewers answer within one working day.")
    document.add_heading("Releases 发布流程", level=1)
    document.add_paragraph("Production releases happen on Tuesdays and Thursdays before 16:00.")
    document.add_paragraph("周五发布冻结，只允许紧急修复上线。")
    rows = [
        ("Environment", "URL", "Owner"),
        ("staging", "staging.yunfan.example", "李娜"),
        ("production", "app.yunfan.example", "张伟"),
    ]
    grid = document.add_table(rows=len(rows), cols=3)
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            grid.cell(r, c).text = text
    document.add_heading("Rollback 回滚", level=2)
    document.add_paragraph("回滚须在15分钟内完成，并在事故频道通报。")
    document.save(str(path))
    return fixed_zip_dates(path)


def price_list_xlsx(path: Path) -> Path:
    """Two sheets, so two pages: 1 办公设备价格 (equipment prices), 2 Cloud quotas."""
    from openpyxl import Workbook

    workbook = Workbook()
    workbook.properties.created = FIXED_DATE
    workbook.properties.modified = FIXED_DATE
    prices = workbook.active
    prices.title = "办公设备价格"
    for row in EQUIPMENT_PRICES:
        prices.append(row)
    quotas = workbook.create_sheet("Cloud quotas")
    for row in CLOUD_QUOTAS:
        quotas.append(row)
    workbook.save(path)
    return fixed_zip_dates(path)


def fixed_zip_dates(path: Path) -> Path:
    """Rewrite an Office file with fixed dates: zip headers record when each member was written,
    and openpyxl stamps the save time as the modified date, so two builds would otherwise
    differ in their bytes (and their hashes)."""
    with zipfile.ZipFile(path) as archive:
        members = [(info, archive.read(info)) for info in archive.infolist()]
    stamp = FIXED_DATE.strftime("%Y-%m-%dT%H:%M:%SZ").encode()
    members = [
        (info, re.sub(rb"(<dcterms:modified[^>]*>)[^<]*", rb"\g<1>" + stamp, data))
        if info.filename == "docProps/core.xml"
        else (info, data)
        for info, data in members
    ]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for info, data in members:
            fixed = zipfile.ZipInfo(info.filename, date_time=FIXED_DATE.timetuple()[:6])
            fixed.compress_type, fixed.external_attr = zipfile.ZIP_DEFLATED, info.external_attr
            archive.writestr(fixed, data)
    return path


def conference_rooms_csv(path: Path) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows(ROOMS)
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_corpus.py <folder>")
    for written in build_corpus(Path(sys.argv[1])):
        print(written)

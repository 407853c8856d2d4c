"""Values as the portal compares them: an answer's number against a page's, a question's
name against a passage's, whatever the width, case or digit grouping each was written in."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# Digits grouped by thousands: "1,234,567" and "1 234" read as "1234567" and "1234".
THOUSANDS = re.compile(r"(?<=\d)[,\u00a0\u202f ](?=\d{3}(?!\d))")


def normalise(text: str) -> str:
    """For comparing values: half-width and ungrouped (`plain`), case-folded, whitespace
    collapsed."""
    return " ".join(plain(text).casefold().split())


def plain(text: str) -> str:
    """NFKC (full-width letters, digits and punctuation become half-width), thousands
    separators dropped: "１０，０８１" is "10081"."""
    return THOUSANDS.sub("", unicodedata.normalize("NFKC", text))


NUMBER = re.compile(r"\d+(?:[.,:/\-]\d+)*")
# A question that asks what something costs ("How much did it cost?", "价格是多少"), and an
# amount of money as documents write it: a currency sign or code before the number ($1,200,
# USD 350, ¥80) or a currency's name after it (1 200 euros, 350 元).
PRICE_ASKED = re.compile(
    r"\b(?:costs?|costed|prices?|priced|dollar amount|how much money|fees?)\b"
    r"|多少钱|价格|价钱|费用|售价|金额|报价",
    re.IGNORECASE,
)
MONEY = re.compile(
    r"[$€£¥￥]\s?\d|\b(?:USD|EUR|GBP|CNY|RMB|US\$)\s?\d"
    r"|\d\s?(?:元|美元|欧元|英镑|块钱|万元|亿元)"
    r"|\d\s?(?:USD|EUR|GBP|CNY|RMB|dollars?|euros?|pounds sterling|yuan|cents?)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Measure:
    """A kind of quantity a question may ask for (`asked`), and how a passage that states one
    names it (`stated`). A value of that kind is never read from passages that do not: a
    median from a table of counts, a population from a table of coordinates, a price from a
    brochure that gives none."""

    name: str
    asked: re.Pattern[str]
    stated: re.Pattern[str]


MEASURES = (
    Measure("price", PRICE_ASKED, MONEY),
    Measure("median", re.compile(r"\bmedian\b|中位数", re.I), re.compile(r"\bmedians?\b|中位", re.I)),
    Measure(
        "average",
        re.compile(r"\baverage\b|\bthe mean\b|\bmean (?:value|age|time|size|score)\b|平均(?:数|值)|均值", re.I),
        re.compile(r"\baverages?\b|\bmeans?\b|\bavg\b|平均|均值", re.I),
    ),
    Measure(
        "accuracy",
        re.compile(r"\baccuracy\b|准确率|正确率|准确度", re.I),
        re.compile(r"\baccura|\bprecision\b|\bF1\b|准确|正确率|精度|精确", re.I),
    ),
    Measure(
        "population",
        re.compile(r"\bpopulation\b|人口", re.I),
        re.compile(r"\bpopulations?\b|\binhabitants\b|\bresidents\b|人口|居民", re.I),
    ),
)


# A count of a thing the question names with its classifier ("多少个谚文音节", "几个汉字"),
# and how a passage states one: a number before the thing ("1.5 汉字", "2万余个汉字") or
# after it ("谚文音节 1200 个", "谚文音节：1200"). English counts ("how many women") are not
# checked so: a table's row answers them without the word (its label says "F").
COUNT_ASKED = re.compile(r"(?:多少|几)个([\u4e00-\u9fff]{2,8}?)(?=的|是|有|呢|吗|[？?，,。；;]|$)")


def count_of(thing: str) -> Measure:
    """The count of `thing` as a measure: asked by COUNT_ASKED, stated next to a number."""
    said = re.escape(thing)
    before = rf"\d[\d.]*\s*[万千百亿]?\s*[余多]?\s*[个種种]?\s*{said}"
    after = rf"{said}\s*[:：]?\s*(?:共计|共|约|有)?\s*\d"
    stated = re.compile(f"{before}|{after}")
    return Measure(f"count: {thing}", COUNT_ASKED, stated)


def measure_asked(question: str) -> Measure | None:
    """The kind of quantity the question asks for (MEASURES, or a count of a thing it names
    with a classifier: `count_of`), if it names one."""
    named = next((measure for measure in MEASURES if measure.asked.search(question)), None)
    if named is not None:
        return named
    counted = COUNT_ASKED.search(question)
    return count_of(counted.group(1)) if counted else None


def states(measure: Measure, text: str) -> bool:
    """Whether the text states a quantity of that kind (thousands separators and full-width
    signs aside: `plain`)."""
    return measure.stated.search(plain(text)) is not None


# Between a number's parts: a dash may be any dash or a tilde (70-79, 70–79, 70~79).
SEPARATORS = {"-": "[-\u2010-\u2015~～]", ".": r"\.", ":": ":", "/": "/", ",": ","}


def number_in(number: str, text: str) -> bool:
    """Whether `text` (normalised) holds `number` (normalised) as a whole number: 3.7 is not
    in 13.75 nor in 3.75; 4.6 is in 4.6.0 (a version and its first release)."""
    pattern = "".join(SEPARATORS.get(char, re.escape(char)) for char in number)
    return re.search(rf"(?<![\d.]){pattern}(?!\d)", text) is not None


# --- Dates, however they are written ---------------------------------------------------------
MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
# 11 March 2005, 11 Mar. 2005; March 11, 2005; 2005年3月11日; 2005-03-11, 2005/3/11, 2005.03.11.
DAY_MONTH_YEAR = re.compile(rf"(?<![\w.]){_DAY}\s+({_MONTH})\.?,?\s+(\d{{4}})(?!\d)", re.IGNORECASE)
MONTH_DAY_YEAR = re.compile(rf"(?<![\w.])({_MONTH})\.?\s+{_DAY},?\s+(\d{{4}})(?!\d)", re.IGNORECASE)
YEAR_MONTH_DAY_CJK = re.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]")
YEAR_MONTH_DAY = re.compile(r"(?<![\d.])(\d{4})([-/.])(\d{1,2})\2(\d{1,2})(?![\d.])")
ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def dates(text: str) -> list[tuple[int, int, str]]:
    """The calendar dates `text` writes (day, month and year, in any of the forms above), as
    (start, end, ISO date), in order: "11 March 2005" and "2005年3月11日" are 2005-03-11."""
    found: list[tuple[int, int, str]] = []
    for match in DAY_MONTH_YEAR.finditer(text):
        found.append((match.start(), match.end(), _iso(match[3], MONTHS[match[2].casefold()], match[1])))
    for match in MONTH_DAY_YEAR.finditer(text):
        found.append((match.start(), match.end(), _iso(match[3], MONTHS[match[1].casefold()], match[2])))
    for match in YEAR_MONTH_DAY_CJK.finditer(text):
        found.append((match.start(), match.end(), _iso(match[1], int(match[2]), match[3])))
    for match in YEAR_MONTH_DAY.finditer(text):
        found.append((match.start(), match.end(), _iso(match[1], int(match[3]), match[4])))
    return sorted((start, end, iso) for start, end, iso in found if iso)


def date_in(iso: str, text: str) -> bool:
    """Whether `text` writes the date `iso` (YYYY-MM-DD) in any form `dates` reads."""
    return any(found == iso for _start, _end, found in dates(text))


def _iso(year: str, month: int, day: str) -> str:
    """The ISO date, or "" where the month or the day cannot be one."""
    if not (1 <= month <= 12 and 1 <= int(day) <= 31):
        return ""
    return f"{int(year):04d}-{month:02d}-{int(day):02d}"

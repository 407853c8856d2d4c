"""A table cell read off the index's row sentences, when the question names one cell.

Every table chunk ends with one sentence per body row, written at indexing time
(ingestion.tables.table_rows): "AIC — GLM, NB, ML, fm_nbin: 24359.1; zero-augmented, ZINB,
ML, fm_zinb: 24211.4". A question about one cell names its row and its column ("what AIC
does the negative binomial model (fm_nbin) have?"). The local model, given a table of
twenty such cells, often reads the cell next door (on the public evaluation it gave the
right value for about a fifth of the table questions). This module finds the cell whose
row header and column path hold the question's words, and only answers when exactly one
cell is best and both its row and its column were named, in a table that holds every
Chinese name the question gives: otherwise the model answers as before.

Words are compared case-folded and width-folded; a trailing plural s is dropped; numbers
split at dashes and commas, so "aged 60 to 69" names the row "60–69" and "(73,84]" the row
"(73,84]". A word joined to another by a hyphen is one word in a row header, which names a
thing ("git" does not name the package "git-buildpackage"), and also its parts in a column
header, which describes ("the hurdle model" names the column "Hurdle-NB").
A word weighs by how few of the table's cells it names (a word in every label,
such as the table's title, weighs nothing). Sexes, the usual dimension of a statistical
table, are one word whatever they are written as (men, male, M, 男性); so are bounds
(< 3.38, below 3.38, 低于 3.38), and a few other labels of statistical tables in Chinese
(对照 control, 病例 case, 合计 total, 年龄 age, 均值 mean, 中位数 median).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import PurePath

from django.conf import settings

from assistant.answering.answer import sources_of
from assistant.answering.evidence import COMMON, TABLE_NUMBER, in_pinyin
from assistant.answering.types import Source
from assistant.answering.values import normalise
from assistant.retrieval.scope import Scope
from assistant.retrieval.search import on_pages, search
from assistant.retrieval.types import Hit, SearchResults
from common.text import cjk_pairs
from ingestion.terms import names
from portal.typing import AnyUser

# A Chinese name the question gives must be in the cell's table: one of three characters or
# more (神农架林区, 嘉峪关市); jieba tags many two-character words as names (正文, 深度), and
# "以小四号为正文" is a question about ctex's table of sizes, which never says 正文.
NAME_CHARS = 3
CANDIDATES = 10  # hits searched for a cell: the fused ones after the passages, and lexical ones
SENTENCE = re.compile(r"^(?P<label>.+?) — (?P<cells>.+: .+)$")
WORD = re.compile(r"[a-z0-9][a-z0-9_.]*[a-z0-9]|[a-z0-9]")
COMPOUND = re.compile(r"(?<=[a-z])-(?=[a-z])")  # git-buildpackage, zero-augmented; not 60-69
# Written forms of the same label: a Chinese question about an English statistical table
# names its usual labels in Chinese (sexes, controls and cases, totals, bounds, ages, means).
# Longest first, since they are replaced inside runs of characters.
CHINESE = (
    ("女性", " female "),
    ("男性", " male "),
    ("女", " female "),
    ("男", " male "),
    ("合计", " total "),
    ("总计", " total "),
    ("对照", " control "),
    ("病例", " case "),
    ("年龄", " age "),
    ("均值", " mean "),
    ("平均", " mean "),
    ("中位数", " median "),
    ("小于", " below "),
    ("低于", " below "),
    ("大于", " above "),
    ("高于", " above "),
)
SIGNS = (("<", " below "), ("≤", " below "), (">", " above "), ("≥", " above "))
ENGLISH = {
    "m": "male",
    "men": "male",
    "man": "male",
    "males": "male",
    "f": "female",
    "women": "female",
    "woman": "female",
    "females": "female",
    "sum": "total",
    "under": "below",
    "less": "below",
    "lower": "below",
    "over": "above",
    "greater": "above",
    "higher": "above",
}


@dataclass(frozen=True)
class Cell:
    source: Source
    row: str  # the row header as the sentence says it
    column: str  # the column path ("" for a row with one unlabelled value)
    value: str
    sentence: str  # the whole row sentence, for the citation's quote


def search_with_cell(
    user: AnyUser, query: str, scope: Scope, *, media: bool | None = None
) -> tuple[SearchResults, tuple[Source, ...], Cell | None]:
    """A direct question's search, its passages, and the one cell it names (None with
    PORTAL_ANSWER_TABLE_CELLS off). The cell is read among the passages, the next fused hits
    and the tables among the lexical channel's best, and where none is named there, also
    among the tables on the passages' own pages: a table's row sentences say the words of a
    cell question, while the fusion may rank the page's prose, or the table's caption, above
    them (a lexical query and a query of the passages' pages more, no embedding, no
    reranking)."""
    if not settings.ANSWER_TABLE_CELLS:
        results = search(user, query, scope=scope, k=settings.ANSWER_SOURCES, media=media)
        return results, sources_of(results.hits), None
    beyond = max(CANDIDATES - settings.ANSWER_SOURCES, 0)
    results = search(user, query, scope=scope, k=settings.ANSWER_SOURCES, media=media, beyond=beyond)
    lexical = search(user, query, scope=scope, k=CANDIDATES, channels=("lexical",), rerank=False, media=False)
    later = [*results.later, *lexical.hits]
    sources, cell = with_cell(query, results.hits, later)
    if cell is None:  # only then: a page's other tables also name cells, and more cells tie more often
        pages, found = [hit.page_id for hit in results.hits], [hit.chunk_id for hit in results.hits]
        beside = [hit for hit in on_pages(scope, pages, exclude=found) if hit.kind == "table"]
        if beside:
            sources, cell = with_cell(query, results.hits, [*later, *beside])
    return results, sources, cell


def with_cell(question: str, hits: Sequence[Hit], later: Sequence[Hit]) -> tuple[tuple[Source, ...], Cell | None]:
    """The answer's passages (`hits` as [1], [2]...) and the one cell the question names,
    read among them and the table chunks of the `later` hits (the next ones, and the lexical
    channel's best): a table's chunk often ranks under the prose of its own page. A cell read
    from a later hit brings that hit in as the last passage, in place of the last one."""
    first = sources_of(hits)
    if not first:  # nothing found: nothing to read either
        return first, None
    seen = {hit.chunk_id for hit in hits}
    tables: list[Source] = []
    for hit in later:
        if hit.kind == "table" and hit.chunk_id not in seen:
            seen.add(hit.chunk_id)
            tables.append(Source(len(first) + len(tables) + 1, hit))
    cell = read(question, [*first, *tables])
    if cell is None or cell.source.number <= len(first):
        return first, cell
    brought = Source(len(first), cell.source.hit)
    return (*first[:-1], brought), replace(cell, source=brought)


def read(question: str, sources: Sequence[Source]) -> Cell | None:
    """The one cell of the sources' tables that the question names, or None."""
    wanted = words(TABLE_NUMBER.sub(" ", question))  # "Table 1" names the table, not a cell of "Step 1"
    if not wanted:
        return None
    scored: list[tuple[float, frozenset[str], Cell]] = []
    given = [name for name in names(question) if len(name) >= NAME_CHARS]
    for source in sources:
        if source.hit.kind != "table" or not _holds(source.hit, given):
            continue
        cells = _cells(source)
        # Words that name the file name no cell: "the deaths spreadsheet" is not "Date of death".
        asked = wanted - words(PurePath(source.hit.document_name).stem)
        if len(cells) > 1 and asked:
            scored.extend(_scored(asked, cells))
    if not scored:
        return None
    scored.sort(key=lambda item: -item[0])
    _weight, named, best = scored[0]
    # Every other cell must name less: a part of what the best one names ("controls with CC"
    # names the men's cell and the women's alike, and neither is read).
    if any(not other < named for _w, other, cell in scored[1:] if cell.value != best.value):
        return None
    return best


def _holds(hit: Hit, named: Sequence[str]) -> bool:
    """Whether a table's chunk (or its file's name) holds every Chinese name the question
    gives (ingestion.terms.names, of NAME_CHARS or more), as written or in pinyin:
    "神农架林区的 12 位行政区划代码" is a row of the districts' table, not the cell of a
    table of contents whose row says "第 12 节" and whose column says "代码实现"."""
    text = normalise(f"{hit.document_name} {hit.text}")
    return all(normalise(name) in text or in_pinyin(name, text) for name in named)


def words(text: str, parts: bool = False) -> set[str]:
    """The words of a question or a label, folded as this module compares them; a hyphenated
    compound is one word, and with `parts` its parts too."""
    text = normalise(text)
    for written, said in (*CHINESE, *SIGNS):
        text = text.replace(written, said)
    if parts:
        text = f"{text} {COMPOUND.sub(' ', text)}"
    found = set()
    for word in WORD.findall(COMPOUND.sub("_", text)):
        word = word.strip(".")
        if (len(word) < 2 and not word.isdigit() and word not in ENGLISH) or word in COMMON:
            continue
        if word in ENGLISH:
            word = ENGLISH[word]
        elif len(word) > 3 and word.endswith("s") and word[-2] not in "sui" and not word[-2].isdigit():
            word = word[:-1]
        found.add(word)
    found.update(cjk_pairs(text))
    return found


def _cells(source: Source) -> list[Cell]:
    found = []
    for line in source.hit.text.splitlines():
        match = SENTENCE.match(line.strip())
        if not match:
            continue
        label = match["label"]
        for piece in match["cells"].split("; "):
            column, _, value = piece.rpartition(": ")
            if value.strip():
                found.append(Cell(source, label, column, value.strip(), line.strip()))
    return found


def _scored(wanted: set[str], cells: Sequence[Cell]) -> list[tuple[float, frozenset[str], Cell]]:
    """Each cell with the question's words it names and their weight: its row header's and
    column path's words, each weighing log(cells / cells naming it); a word every cell names
    names nothing. A cell counts only when the question names its row (a table's only row
    too: a column alone is not enough) and its column (where the table has more than one)."""
    row_words = {label: words(label) for label in {cell.row for cell in cells}}
    column_words = {label: words(label, parts=True) for label in {cell.column for cell in cells}}
    rows = [row_words[cell.row] for cell in cells]
    columns = [column_words[cell.column] for cell in cells]
    total = len(cells)
    weight: dict[str, float] = {}
    for word in wanted:
        naming = sum(1 for row, column in zip(rows, columns, strict=True) if word in row or word in column)
        if 0 < naming < total:
            weight[word] = math.log(total / naming)
    many_rows = len({cell.row for cell in cells}) > 1
    many_columns = len({cell.column for cell in cells}) > 1
    scored: list[tuple[float, frozenset[str], Cell]] = []
    for cell, row, column in zip(cells, rows, columns, strict=True):
        # A table's only row is named by any of its words (they weigh nothing: every cell has them).
        in_row = {word for word in row & wanted if word in weight or not many_rows}
        in_column = {word for word in (column - row) & wanted if word in weight}
        if (cell.row and not in_row) or (many_columns and not in_column):
            continue
        named = frozenset(in_row | in_column)
        scored.append((sum(weight.get(word, 0.0) for word in named), named, cell))
    return scored

"""What in a question must be found literally in the documents: its anchors.

A near miss asks about something the documents do not hold: another version ("gnuplot 6.0"
when the manual is 5.4), another year, another person, another program. A small model reads
the passages about the neighbour and answers with the neighbour's value. Anchors catch this
before the model writes: the numbers, versions, names and identifiers of a question, each of
which must occur in the passages given to the model, or the portal says itself that the
documents do not hold the answer.

A number must be in the passages themselves (the value next door is the usual mistake); a
name may be anywhere in the passages' documents (a manual names its program on its title
page, not on every page).

Anchors are tokens a person would not paraphrase: anything with a digit (a date is one
anchor, in any form: 11 March 2005 is 2005-03-11); identifiers
(`package.cron.yearly`, `--output`, `\\today`, `GNUPLOT_LIB`); words with a capital inside
or all in capitals (TeXworks, FLC); capitalised words inside an English sentence (names:
Gene Wilder); Latin words in a Chinese question (SnowNLP, KiCad); titles in 《》; short terms
in quotes (“小八号”); a table's row named by its label ("row D": a row of a table in the
passages, not the letter anywhere). Ordinary words are never anchors: a question may word
them otherwise than the document.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from django.db.models import BooleanField, Count, ExpressionWrapper, Q

from assistant.answering.types import Source
from assistant.answering.values import ISO_DATE, NUMBER, date_in, dates, normalise, number_in, plain
from assistant.retrieval.scope import Scope
from assistant.retrieval.search import closest_holding, on_pages
from assistant.retrieval.types import Hit
from common.text import CJK, DASH, TOKEN, romanised, unmarked
from knowledge.models import Page

TITLE = re.compile(r"《([^》]{1,40})》")
# A Chinese title is there as a title: in 《》 or quoted, or in pinyin in an English text
# ("Zhufu by Lu Xun"); not as characters of a sentence (《故乡》 is not in "低头思故乡").
TITLE_WRITTEN = ("《{}》", "“{}”", "「{}」", '"{}"')
# A term the question quotes is meant as written: ctex's “小八号” is not its 八号. A short one
# only (QUOTED_TERM_MAX characters in Chinese, words in English, no punctuation inside): a
# quoted line of a poster or a sentence is matched by its words, not as one anchor.
QUOTED = re.compile(r"[“「『\"]([^”」』\"\n]{1,40})[”」』\"]")
QUOTED_TERM_MAX = {"zh": 8, "en": 3}
INNER_PUNCTUATION = re.compile(r"[,.;:!?，。；：！？、]")
DIGITS = re.compile(r"\d+")
# Capitalised words that start clauses or name nothing in particular; months and days
# (documents write dates as 2005-03-08 as often as in words).
COMMON = frozenset(
    """
    a an and are as at be but by can could did do does for from had has have how i if in into is it its
    may might must of on or shall should so than that the their then there these they this those to was
    were what when where which who whom whose why will with would you your please show tell give list
    find according table figure page chapter section part slide step example note version default
    many much
    january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec
    monday tuesday wednesday thursday friday saturday sunday
    """.split()  # noqa: SIM905 (a list of words, read as one)
)
POSSESSIVE = re.compile(r"'s$")
COMPOUND = re.compile(r"[a-z]+(-[a-z]+)+")
SENTENCE_START = re.compile(r"(^|[.?!:;]\s+|\n)$")
SLASHED = re.compile(r"[^\W\d_]+(/[^\W\d_]+)+")  # words joined by slashes: INR/USD, TCP/IP
PUNCTUATION = re.compile(r"[!-/:-@\[-`{-~]")  # what Markdown may escape with a backslash
OPTION = re.compile(r"[\\\-]+\w")  # an option or a command as written: -9, --best, \hline
# A table's row the question names by its label ("row D", "D 行"): the anchor "row D", held
# by a row of a table in the passages (ingestion.tables.Row says a row as "D — Header 1: …"),
# not by the letter anywhere.
ROW_NAMED = re.compile(r"\brow\s+([A-Za-z0-9][\w.]{0,15})\b|(?<![A-Za-z0-9])([A-Z])\s*行")
ROW_ANCHOR = re.compile(r"row (\S+)")
# A table the question names by its number ("Table 1", "表 2"; a cell is not "Step 1"), and its
# caption at the start of a line ("Table 1: Comparison of …").
TABLE_NUMBER = re.compile(r"(?i)\b(?:table|tab\.)\s*\d+|表\s*\d+")
TABLE_PAGES = 3  # pages of the passages' documents read for a table the question names
ELSEWHERE_CHUNKS = 3  # chunks holding a name the passages lack, looked at (`elsewhere`)


def anchors(text: str) -> list[str]:
    """The question's anchors, in order, each once (numbers as plain digits: 65,536 is 65536)."""
    text = plain(text)
    found: list[str] = [f"《{title.strip()}》" for title in TITLE.findall(text)]
    quoted = (term.strip() for term in QUOTED.findall(text))
    found += [term for term in quoted if _term(term)]
    found += [f"row {english or chinese}" for english, chinese in ROW_NAMED.findall(text)]
    chinese = bool(CJK.search(text))
    written = dates(text)  # a date is one anchor, whatever form the document writes it in
    for match in TOKEN.finditer(text):
        date = next((iso for start, end, iso in written if start <= match.start() < end), None)
        if date is not None:
            found.append(date)
            continue
        token = POSSESSIVE.sub("", match.group()).rstrip(".-/'")
        if len(token) < 2 and not token.isdigit():
            continue
        if _is_anchor(token, chinese, SENTENCE_START.search(text[: match.start()]) is not None):
            found.append(token)
    return list(dict.fromkeys(found))


def _term(quoted: str) -> bool:
    """Whether a quoted text is a term (an anchor), not a quoted line."""
    if not quoted or INNER_PUNCTUATION.search(quoted):
        return False
    if CJK.search(quoted):
        return len(quoted) <= QUOTED_TERM_MAX["zh"]
    return len(quoted.split()) <= QUOTED_TERM_MAX["en"]


def numbered(anchor: str) -> bool:
    """Whether an anchor is a number, a date, a version or anything else with a digit: it must
    be in the passages themselves, where a name may be anywhere in their documents. So must a
    row named by its label ("row D"): it is read from a table's chunk."""
    return DIGITS.search(anchor) is not None or ROW_ANCHOR.fullmatch(anchor) is not None


def _is_anchor(token: str, chinese: bool, starts_sentence: bool) -> bool:
    if any(char.isdigit() for char in token):
        return True
    if token.lower() in COMMON:
        return False
    if COMPOUND.fullmatch(token):  # double-click, gd-based: words a document may write apart
        return False
    if chinese or any(char in token for char in "._-\\/") or any(char.isupper() for char in token[1:]):
        return True
    return token[0].isupper() and not starts_sentence


def present(anchor: str, text: str) -> bool:
    """Whether `text` (normalised) holds the anchor. A date in any form (11 March 2005 is
    2005-03-11 and 2005年3月11日: values.dates), not its day and year apart. A version, a
    year or any number of three digits or more must be there as a whole number ("6.0" is
    not in "16.04" nor in a 6 and a 0 on the page; any dash: values.number_in); an option or
    a command (`-9`, `--best`, `\\hline`) as a whole token, its leading dashes any dash ("-9"
    is not in "-90" nor in "2-9"); a short number or a word with digits needs its digit runs
    (70-79 holds if 70 and 79 are there; a day "8" in 2005-03-08); words joined by slashes
    may be joined otherwise (INR/USD is the variable inrusd); a Chinese name may be written
    in pinyin, as a word of its own (祝福 in "Zhufu by Lu Xun": common.text.romanised); a
    Chinese title as a title (`TITLE_WRITTEN`, or in pinyin); anything else its words as
    written (case aside). A Markdown source counts as its reader sees it too: `**\\-9**` and
    `foo\\_bar` hold -9 and foo_bar (common.text.unmarked)."""
    wanted = normalise(anchor)
    if _present(wanted, text):
        return True
    seen = unmarked(text)
    return seen != text and _present(wanted, seen)


def _present(wanted: str, text: str) -> bool:
    title = TITLE.fullmatch(wanted)
    if title is not None:
        name = title.group(1)
        if not CJK.search(name):
            return name in text
        return any(form.format(name) in text for form in TITLE_WRITTEN) or in_pinyin(name, text)
    row = ROW_ANCHOR.fullmatch(wanted)
    if row is not None:
        return wanted in text or re.search(rf"(?<!\S){re.escape(row.group(1))} — ", text) is not None
    if ISO_DATE.fullmatch(wanted):
        return date_in(wanted, text)
    if NUMBER.fullmatch(wanted) and (len(wanted) >= 3 or not wanted.isdigit()):
        return number_in(wanted, text)
    if OPTION.match(wanted):
        return _option_in(wanted, text)
    if wanted in text:
        return True
    if SLASHED.fullmatch(wanted):  # INR/USD as a document's identifier writes it: inrusd, INR-USD
        parts = wanted.split("/")
        return any(joint.join(parts) in text for joint in ("", "-", "_", " "))
    if in_pinyin(wanted, text):
        return True
    runs = DIGITS.findall(wanted)
    if runs:
        return all(run in text for run in runs) and all(
            word in text for word in re.split(r"[\W\d_]+", wanted) if len(word) > 1
        )
    return False


def in_pinyin(name: str, text: str) -> bool:
    """Whether `text` (normalised) writes the Chinese name in pinyin, as a word of its own:
    祝福 in an English text's "Zhufu by Lu Xun" (common.text.romanised)."""
    return any(re.search(rf"(?<![a-z]){form}(?![a-z])", text) for form in romanised(name))


def _option_in(option: str, text: str) -> bool:
    """Whether `text` holds the option or command as a token of its own, nothing of a word
    just after it. An option (`-9`, `--best`): nothing of a word or a dash just before it,
    each leading dash any dash a document prints ("--" also one en or em dash). A command
    (`\\hline`) may follow another (`\\toprule\\hline`)."""
    lead = len(option) - len(option.lstrip("-"))
    rest = re.escape(option[lead:])
    if not lead:
        return re.search(rf"{rest}(?!\w)", text) is not None
    dashes = f"{DASH}{{{lead}}}|[\u2013\u2014]" if lead == 2 else f"{DASH}{{{lead}}}"
    return re.search(rf"(?<![\w\\\-\u2010-\u2015\u2212])(?:{dashes}){rest}(?!\w)", text) is not None


def missing(question: str, passages: Iterable[str]) -> list[str]:
    """The question's anchors that none of the passages holds."""
    text = normalise(" ".join(passages))
    return [anchor for anchor in anchors(question) if not present(anchor, text)]


def said(hit: Hit) -> str:
    """All that a passage says, for checking a question or an answer against it: its
    document's name, its headings (a Markdown section's title is its context) and its text."""
    headings = " ".join(str(part) for part in hit.location.get("heading_path") or [])  # type: ignore[attr-defined]
    return f"{hit.document_name} {headings} {hit.text}"


def unsupported(question: str, sources: Sequence[Source], also: Sequence[str] = ()) -> list[str]:
    """The question's anchors that the sources do not support: numbers absent from the
    passages, names absent from the passages' documents (one query for all the names).
    `also`: more texts the answer may rest on (what the portal remembers about the user)."""
    # A passage's document name and headings count as said there: "manual.md" is found.
    lacking = missing(question, [*also, *(said(source.hit) for source in sources)])
    names = [anchor for anchor in lacking if not numbered(anchor)]
    if not names:
        return lacking
    pages = Page.objects.filter(document_id__in={source.hit.document_id for source in sources})
    counts = pages.aggregate(**{f"n{i}": Count("pk", filter=_written(name)) for i, name in enumerate(names)})
    named = {name for i, name in enumerate(names) if counts[f"n{i}"]}
    return [anchor for anchor in lacking if anchor not in named]


def checked(
    question: str,
    sources: Sequence[Source],
    scope: Scope,
    lacking: Sequence[str],
    also: Sequence[str] = (),
    about: Callable[[Hit], bool] = lambda _hit: True,
) -> tuple[tuple[Source, ...], list[str], Source | None]:
    """The passages, the question's anchors they do not support, and the chunk brought in,
    from the anchors they were found to lack (`unsupported`, with the texts `also` counted):
    where they lack some, a chunk on the page of one of them (the best-ranked first) that
    holds every one they lack, and every number the question names (the row it asks about
    holds them all: "13" alone on a page about level 10 is not it), comes in as the last
    passage, in place of the last one (`beside`); else, where they lack only names, the
    chunk of another document that holds them all and is `about` the question (`elsewhere`)
    comes in as the first, the others after it, the last left out; and they are checked
    again."""
    sources = tuple(sources)
    if not lacking:
        return sources, [], None
    numbers = [anchor for anchor in anchors(question) if numbered(anchor)]
    nearby = beside(sources, scope, list(dict.fromkeys([*lacking, *numbers])), tables_named(question, sources))
    if nearby is not None:
        sources = (*sources[:-1], nearby)
        return sources, unsupported(question, sources, also), nearby
    found = elsewhere(question, sources, scope, lacking, about)
    if found is None:
        return sources, list(lacking), None
    # The passages' documents never name what it asks about: the chunk that does leads.
    sources = (Source(1, found), *(Source(source.number + 1, source.hit, source.step) for source in sources[:-1]))
    return sources, unsupported(question, sources, also), sources[0]


def beside(sources: Sequence[Source], scope: Scope, wanted: Sequence[str], also: Sequence[int] = ()) -> Source | None:
    """A chunk on the pages `also` (`tables_named`: the table the question names) or on the
    page of one of the passages (the best-ranked first) that holds every anchor in `wanted`,
    numbered as the last passage; None when there is none. A table's chunk often ranks
    under its own page's prose, which does not hold the row the question names ("(51,62]");
    only those pages are looked at, since a near miss's anchor is usually somewhere else
    nearby (another table's date, "prior to 4.6")."""
    if not sources or not wanted:
        return None
    pages = list(dict.fromkeys([*also, *(source.hit.page_id for source in sources)]))
    for hit in on_pages(scope, pages, exclude=[source.hit.chunk_id for source in sources]):
        text = normalise(said(hit))
        if all(present(anchor, text) for anchor in wanted):
            return Source(len(sources), hit)
    return None


def elsewhere(
    question: str,
    sources: Sequence[Source],
    scope: Scope,
    lacking: Sequence[str],
    about: Callable[[Hit], bool] = lambda _hit: True,
) -> Hit | None:
    """Where the passages lack only names (`unsupported`: not in their documents at all),
    the chunk of the scope that holds every one of them and is `about` the question (the
    closest in meaning first, of the ELSEWHERE_CHUNKS closest: search.closest_holding),
    or None when they lack a number (it must be in the passages: the
    neighbour's value is the usual mistake) or no such chunk holds them all. A Chinese
    question about an English manual shares none of its words but the name: "用 zhlipsum
    时…输出…段落" ranks ctex's pages on 段落 and 输出 over zhlipsum's manual, which says how.
    A near miss's name is in no document, or only where nothing of the question is said
    ("TeXstudio" in a list of editors, asked for its shortcut): still declined."""
    if not sources or not lacking or any(numbered(anchor) for anchor in lacking):
        return None
    held = Q()
    for name in lacking:
        held &= _written(name)
    return next((hit for hit in closest_holding(scope, question, held, ELSEWHERE_CHUNKS) if about(hit)), None)


def tables_named(question: str, sources: Sequence[Source]) -> list[int]:
    """The pages of the passages' documents that name a table the question names by its
    number ("in Table 1", or "表 1" of an English document: a table's chunk holds its cells
    and rarely the words of a question about one, and its caption is the prose beside it),
    the page with its caption first, at most TABLE_PAGES of them."""
    named = list(dict.fromkeys(TABLE_NUMBER.findall(question)))
    if not named or not sources:
        return []
    documents = {source.hit.document_id for source in sources}
    pages: list[int] = []
    for name in named:
        number = DIGITS.findall(name)[-1]  # "表 2" names an English document's Table 2 too
        said = rf"(table|tab\.|表)\s*{number}([^0-9]|$)"
        # PostgreSQL's (?n): ^ also matches after a newline, at the start of a caption's line.
        caption = ExpressionWrapper(Q(text__iregex=rf"(?n)^\s*{said}"), output_field=BooleanField())
        found = (
            Page.objects.filter(document_id__in=documents, text__iregex=said)
            .annotate(caption=caption)
            .order_by("-caption", "document_id", "number")
        )
        pages += found.values_list("pk", flat=True)[:TABLE_PAGES]
    return list(dict.fromkeys(pages))[:TABLE_PAGES]


def _written(name: str) -> Q:
    """A page that holds the name as `present` would find it: words joined by slashes may be
    joined otherwise there (INR/USD as inrusd); a Chinese name may be in pinyin, a Chinese
    title is there as a title; a Markdown page may escape its punctuation (`\\-\\-best`, `foo\\_bar`)."""
    title = TITLE.fullmatch(name)
    if title is not None:
        if not CJK.search(title.group(1)):
            return Q(text__icontains=title.group(1))
        found = _pinyin_written(title.group(1))
        for form in TITLE_WRITTEN:
            found |= Q(text__icontains=form.format(title.group(1)))
        return found
    found = Q(text__icontains=name)
    escaped = PUNCTUATION.sub(r"\\\g<0>", name)
    if escaped != name:
        found |= Q(text__icontains=escaped)
    if SLASHED.fullmatch(normalise(name)):
        parts = normalise(name).split("/")
        for joint in ("", "-", "_", " "):
            found |= Q(text__icontains=joint.join(parts))
    return found | _pinyin_written(name)


def _pinyin_written(name: str) -> Q:
    """A page that writes the Chinese name in pinyin as a word of its own, as `in_pinyin`
    finds it (PostgreSQL's \\m and \\M: a word's start and end); an empty Q, which adds
    nothing to the alternatives it is joined to, for a name with no pinyin."""
    found = Q()
    for form in romanised(name):
        found |= Q(text__iregex=rf"\m{form}\M")
    return found

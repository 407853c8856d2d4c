"""The model's answer, checked against the passages it was given before anyone keeps it.

A small model writes the value next door, a number from its own training, or only the
citation ("The option that does this is [2]."). The portal does not trust the prose:

- every claim of the answer (number, date, version, identifier, quoted string, name) must
  be in one of the passages, or in the question, or in what the portal remembers about the
  user; a sentence with a claim found nowhere is removed;
- a sentence whose claims are in a passage it does not cite gets that passage's [n]: no
  number is shown without the citation it came from;
- an answer left with nothing from the passages (all removed, or never there) gets the
  passage's own words: the quote of the best cited passage, with its [n].

    checked = verify.check(answer, question, sources, language)
    checked.text, checked.removed, checked.quoted, checked.quotes   # {n: the span shown}
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from assistant.answering import passages
from assistant.answering.answer import CITATION, cited
from assistant.answering.evidence import said
from assistant.answering.types import Source
from assistant.answering.values import NUMBER, normalise, number_in, plain
from common.language import Language
from common.text import CJK, NUMERAL, TOKEN, is_cjk, unmarked

LIST_MARKER = re.compile(r"^\s*(?:\d{1,2}[.)、]|[-*+])\s+", re.M)
QUOTED = re.compile(r"[“\"「『`‘]([^”\"」』`’\n]{2,80})[”\"」』`’]")
# A sentence: up to its end mark (a full stop only before a space: "1.5" goes on), with the
# citation marks and spaces after it ("五年。[3]": the mark belongs to the sentence before).
SENTENCE = re.compile(r"[^\n]*?(?:[。！？!?]+|\.(?=\s|$)|\n|$)(?:\s*[\[【][\d,，、\s]+[\]】])*[ \t]*\n*", re.S)
QUOTE_CHARS = 300  # of a quote shown in an answer
INTRO = {"zh": "资料原文：", "en": "The passage says: "}


@dataclass
class Checked:
    text: str
    removed: list[str] = field(default_factory=list)  # the sentences taken out, each with its lost claims
    quoted: bool = False  # the passage's own words were added
    quotes: dict[int, str] = field(default_factory=dict)  # passage number → the span the answer rests on


def claims(text: str) -> list[str]:
    """The checkable claims of a piece of answer: numbers, quoted strings, identifiers and
    names, each once (citation marks and list markers are not claims)."""
    text = LIST_MARKER.sub("", CITATION.sub(" ", plain(text)))
    found = [match.group(1).strip() for match in QUOTED.finditer(text)]
    found += [number for number in NUMBER.findall(text)]
    chinese = bool(CJK.search(text))
    for match in TOKEN.finditer(text):
        token = match.group().rstrip(".-/'")
        if len(token) < 2 or any(char.isdigit() for char in token):
            continue
        identifier = any(char in token for char in "._\\/") or token[0] in "-\\" or any(c.isupper() for c in token[1:])
        at_start = re.search(r"(^|[.?!:;]\s+|\n)\W*$", text[: match.start()]) is not None
        name = token[0].isupper() and (chinese or not at_start)
        if identifier or name:
            found.append(token)
    return list(dict.fromkeys(claim for claim in found if claim))


def sentences(text: str) -> list[str]:
    """The answer's sentences, each with the citation marks and spaces that follow it; they
    join back into the text."""
    return [match.group() for match in SENTENCE.finditer(text) if match.group()]


def found(claim: str, text: str) -> bool:
    """Whether `text` (normalised) holds the claim: a number as a whole number (3.7 is not in
    13.75; any dash between its parts: values.number_in), anything else as written (case and
    width aside), in a Markdown source as its reader sees it too (`\\-\\-best` holds --best)."""
    wanted = normalise(claim)
    if NUMBER.fullmatch(wanted):
        return number_in(wanted, text)
    return wanted in text or wanted in unmarked(text)


def check(
    answer: str, question: str, sources: Sequence[Source], language: Language, also: Sequence[str] = ()
) -> Checked:
    """The answer with unsupported sentences removed, missing citations added and, when
    nothing from the passages is left, the best passage quoted (see the module)."""
    if not sources:
        return Checked(answer)
    texts = {source.number: normalise(said(source.hit)) for source in sources}
    given = normalise(" ".join([question, *also]))
    kept: list[str] = []
    result = Checked(answer)
    claimed: dict[int, list[str]] = {}
    for sentence in sentences(answer):
        own = cited(sentence, len(sources))
        missing: list[str] = []
        holders: list[int] = []
        for claim in claims(sentence):
            if found(claim, given) and not NUMBER.fullmatch(claim):
                continue  # a name the question itself gave
            where = [number for number, text in texts.items() if found(claim, text)]
            if not where:
                if not found(claim, given):
                    missing.append(claim)
                continue
            holder = next((number for number in own if number in where), where[0])
            if not found(claim, given):  # what the answer adds, not what the question said
                claimed.setdefault(holder, []).append(claim)
            if holder not in own and holder not in holders:
                holders.append(holder)
        if missing:
            result.removed.append(f"{sentence.strip()} ({', '.join(missing)})")
            continue
        if holders:
            sentence = _with_citations(sentence, holders)
        kept.append(sentence)
    text = "".join(kept).strip()
    used = cited(text, len(sources))
    wanted = passages.terms(question)
    if not _informative(text, question, [texts[number] for number in used] or list(texts.values())):
        best = used[0] if used else sources[0].number
        quote = quoted(question, sources, best, language)
        if quote:
            text = f"{text}\n\n{quote}" if text and result.removed == [] else quote
            result.quoted = True
            used = cited(text, len(sources))
    result.text = text or answer
    for number in used:
        span = passages.quote(_source(sources, number).hit.text, wanted, claimed.get(number, ()))
        if span:
            result.quotes[number] = span
    return result


def quoted(question: str, sources: Sequence[Source], number: int, language: Language) -> str:
    """Passage `number`'s words about the question, quoted and cited ("The passage says: “…”
    [2]"); empty when the passage has nothing to quote."""
    wanted = passages.terms(question)
    span = shorten(passages.quote(_source(sources, number).hit.text, wanted), wanted)
    return f"{INTRO[language]}“{span}” [{number}]" if span else ""


def _source(sources: Sequence[Source], number: int) -> Source:
    return next(source for source in sources if source.number == number)


def _with_citations(sentence: str, numbers: Sequence[int]) -> str:
    """The sentence with [n] for each number, before its closing punctuation."""
    marks = "".join(f"[{number}]" for number in numbers)
    body = sentence.rstrip()
    tail = sentence[len(body) :]
    match = re.search(r"[。！？.!?；;]$", body)
    if match:
        return f"{body[: match.start()]} {marks}{body[match.start() :]}{tail}"
    return f"{body} {marks}{tail}"


def _informative(text: str, question: str, cited_texts: Sequence[str]) -> bool:
    """Whether the answer says something from the passages that the question did not: a
    number, name or identifier, or two words (pairs of Chinese characters), that a cited
    passage holds and the question does not. "The option that does this is [2]." says nothing."""
    body = CITATION.sub(" ", text)
    if not body.strip():
        return False
    asked = passages.terms(question).weights
    pool = " ".join(cited_texts)
    said = passages.terms(body).weights
    added = [term for term in said if term not in asked and term in pool]
    return len(added) >= 2 or any(said[term] == passages.ANCHOR_WEIGHT or NUMERAL.search(term) for term in added)


def shorten(span: str, wanted: passages.Terms | None = None) -> str:
    """A quote of at most QUOTE_CHARS characters, centred on its best part."""
    span = " ".join(span.split())
    if len(span) <= QUOTE_CHARS:
        return span
    focused = passages.focus(span, wanted or passages.terms(span[:QUOTE_CHARS]), passages.tokens(span[:QUOTE_CHARS]))
    return cut(focused, QUOTE_CHARS + 20)


def cut(text: str, limit: int) -> str:
    """`text` within `limit` characters, ended after its last whole sentence that fits, else
    at a word's end, with "…" where something was left out; never inside a word."""
    if len(text) <= limit:
        return text
    room = text[: limit - 1]
    ends = [match.end() for match in passages.SENTENCE.finditer(room) if match.end() > limit // 2]
    if ends:
        return room[: ends[-1]].rstrip() + " …"
    space = room.rfind(" ")
    if space > limit // 2 and not is_cjk(room[space - 1]):
        return room[:space].rstrip() + " …"
    return room + "…"

"""The evidence reader: which sentence, table row or line of the retrieved passages answers
the question, picked without a chat model, in a fraction of a second.

Every unit of the first passages (answering.passages.units: lines where the text has them,
else sentences; sentences that address the assistant are left out) is a candidate. Each is
scored on what the question names and asks (policy.READER_WEIGHTS, calibrated on the public
evaluation: bench/README.md):

- anchors: the share of the question's anchors (numbers, versions, names, identifiers as
  written: answering.evidence) the unit and its neighbours hold (0 when it names none);
- overlap: the share of the question's terms (words; character pairs in Chinese) the unit holds;
- context: the share its passage's headings and file name hold (a section titled with the
  question's words makes its sentences likelier);
- rank: the passage's place in the search results;
- adds: whether the unit holds a value the question does not (a number, a name, an
  identifier): an answer says something the question did not (a table's header row holds
  the question's words, its data row the value);
- similarity: the embedder's cosine between the question (e5 "query:") and the unit (e5
  "passage:"), computed for the best few candidates by the other features only
  (policy.READER_EMBED), so that it costs a few dozen short texts.

Whether the passages answer at all: the anchors are checked before (answering.evidence);
then whether a Chinese name of the question that no passage holds is in no document of the
collections at all (`unknown`, set by answering.modes.read: "台北市" in a table of the
mainland's districts); then whether a question that asks for a kind of quantity (a price, a
median, an average, an accuracy, a population: answering.values.MEASURES) has passages that
state none of that kind (`unmeasured`: no amount of money, no median ...); then the share
of the question's other words that no passage mentions (`absent`), against
policy.READER_ABSENT_MAX for the question's language, unless a quote holds every number the
question names (`Reading.pinned`); and the best candidate's relevance (its overlap plus the
embedder's lift, without anchors or rank: `Reading.relevance`), against
policy.READER_ANSWER_MIN.

The answer a person reads is the best candidate with its neighbours (a row with the header
line above it, a sentence with the next one when it is short: `window`), and a second
candidate from another passage when it scores nearly as well (policy.READER_SECOND_SHARE).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from assistant.answering import passages, policy
from assistant.answering.evidence import COMMON, anchors, in_pinyin, numbered, present
from assistant.answering.evidence import said as evidence_said
from assistant.answering.types import Source
from assistant.answering.values import NUMBER, measure_asked, normalise, states
from assistant.retrieval.fusion import MEDIA_WORDS
from assistant.retrieval.types import Hit
from common.language import language_of
from common.text import is_cjk, unmarked
from ingestion.terms import names, words

# Words a question uses for the document it asks about, or for asking, that a passage need
# not repeat ("the vignette says", "in the spreadsheet", "文档里写的"): never missing.
GENERIC = frozenset(
    """
    vignette package spreadsheet brochure manual guide document documents file files talk slides
    readme paper article handbook reference chart say says said mean means called use used
    文档 手册 指南 表格 资料 文件 说明 规定 提到 写 说
    """.split()  # noqa: SIM905 (a list of words, read as one)
)
IDENTIFIER = re.compile(r"[._\\/-]")  # what makes an anchor an identifier, not a name
# (question, texts) -> the cosine similarity of each text to the question.
Similarity = Callable[[str, Sequence[str]], Sequence[float]]


@dataclass(frozen=True)
class Candidate:
    source: Source
    index: int  # of the unit in its passage's units
    text: str  # the unit
    window: str  # the unit with the neighbours a reader needs, as quoted
    score: float
    figures: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Reading:
    """The candidates, best first, and how sure the reader is of the first."""

    candidates: tuple[Candidate, ...]
    anchors: tuple[str, ...]  # the question's anchors
    # The question's words no passage holds, and their share (`absent`): what the question
    # asks about that the passages never mention.
    absent: float = 0.0
    unmentioned: tuple[str, ...] = ()
    # The question's Chinese names that no document of the collections mentions at all (set
    # by answering.modes.read, which queries the index): a near miss in words, not anchors.
    unknown: tuple[str, ...] = ()
    language: str = "en"  # the question's, whose share of unmentioned words declines it
    # The kind of quantity the question asks for when no passage states one (values.MEASURES):
    # "price" for "How much did the LinnSequencer cost?" over its brochure, which gives none;
    # "median" for a median age asked of a table of counts. Empty otherwise.
    unmeasured: str = ""

    @property
    def best(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None

    @property
    def pinned(self) -> bool:
        """Whether the question names numbers (a date, a row's figures) and one of the quotes
        holds every one of them: it is the unit the question asks about, whatever words the
        question says the rest with ("after carrying the last observation forward, what is the
        value on 8 March 2005?")."""
        numbers = [anchor for anchor in self.anchors if numbered(anchor)]
        return bool(numbers) and any(
            all(present(anchor, normalise(quote.window)) for anchor in numbers) for quote in self.quotes()
        )

    @property
    def confidence(self) -> float:
        """The best candidate's score, squashed into 0..1 (policy.READER_CONFIDENCE_SCALE)."""
        if not self.candidates:
            return 0.0
        return round(1 - math.exp(-max(self.candidates[0].score, 0.0) / policy.READER_CONFIDENCE_SCALE), 3)

    @property
    def relevance(self) -> float:
        """How much the best candidate is about the question, whatever its anchors and rank:
        its share of the question's terms plus the embedder's lift (what decides whether the
        passages answer at all: policy.READER_ANSWER_MIN)."""
        return float(self.candidates[0].figures.get("relevance", 0.0)) if self.candidates else 0.0

    def quotes(self) -> list[Candidate]:
        """What the evidence answer quotes: the best candidate, and the best of another
        passage when it scores at least policy.READER_SECOND_SHARE of the best."""
        best = self.best
        if best is None:
            return []
        chosen = [best]
        for candidate in self.candidates[1:]:
            if candidate.source.number == best.source.number:
                continue
            if candidate.score >= best.score * policy.READER_SECOND_SHARE:
                chosen.append(candidate)
            break
        return chosen


def read(
    question: str,
    sources: Sequence[Source],
    *,
    similarity: Similarity | None = None,
    step_query: str = "",
) -> Reading:
    """The candidates of `sources` for `question`, best first (at most policy.READER_CANDIDATES).
    `step_query`: a plan step's own question, whose terms count as the question's."""
    wanted = passages.terms(question, step_query) if step_query else passages.terms(question)
    total = sum(wanted.weights.values()) or 1.0
    named = tuple(anchors(step_query or question))
    asked = normalise(f"{question} {step_query}")
    weights = policy.READER_WEIGHTS
    scored: list[Candidate] = []
    for rank, source in enumerate(sources):
        hit = source.hit
        parts = [part for part in passages.units(hit.text) if not passages.INSTRUCTION.search(part)]
        headings = " ".join(str(part) for part in hit.location.get("heading_path") or [])  # type: ignore[attr-defined]
        context = wanted.score(f"{hit.document_name} {headings}") / total
        prior = 1.0 / (1 + rank)
        for index, part in enumerate(parts):
            window = _window(parts, index)
            own = _anchor_share(named, normalise(part))
            held = own + 0.5 * (_anchor_share(named, normalise(window)) - own)  # neighbours count half
            overlap = wanted.score(part) / total
            adds = float(_adds(part, asked))
            figures = {
                "anchors": round(held, 3),
                "overlap": round(overlap, 3),
                "context": round(context, 3),
                "adds": adds,
            }
            score = (
                weights["anchors"] * held
                + weights["overlap"] * overlap
                + weights["context"] * context
                + weights["rank"] * prior
                + weights["adds"] * adds
            )
            figures |= {"rank": rank + 1, "relevance": round(overlap, 3)}
            scored.append(Candidate(source, index, part, window, score, figures))
    scored.sort(key=lambda candidate: -candidate.score)
    if similarity is not None and scored:
        scored = _with_similarity(question, scored, similarity)
    share, lacking = absent(step_query or question, sources)
    language = language_of(question)
    measure = measure_asked(step_query or question)
    unmeasured = measure.name if measure and not any(states(measure, evidence_said(s.hit)) for s in sources) else ""
    return Reading(
        tuple(scored[: policy.READER_CANDIDATES]),
        named,
        share,
        tuple(lacking),
        language=language,
        unmeasured=unmeasured,
    )


def _with_similarity(question: str, scored: list[Candidate], similarity: Similarity) -> list[Candidate]:
    """The best policy.READER_EMBED candidates rescored with the embedder's similarity (above
    policy.READER_SIMILARITY_FLOOR, where e5's cosines between unrelated texts lie)."""
    head, tail = scored[: policy.READER_EMBED], scored[policy.READER_EMBED :]
    cosines = similarity(question, [candidate.text for candidate in head])
    weight = policy.READER_WEIGHTS["similarity"]
    rescored = []
    for candidate, cosine in zip(head, cosines, strict=True):
        lift = _lift(cosine)
        figures = candidate.figures | {"similarity": round(float(cosine), 3)}
        figures["relevance"] = round(candidate.figures["overlap"] + lift, 3)
        rescored.append(
            Candidate(
                candidate.source,
                candidate.index,
                candidate.text,
                candidate.window,
                candidate.score + weight * lift,
                figures,
            )
        )
    rescored.sort(key=lambda candidate: -candidate.score)
    return rescored + tail


def relevance(question: str, texts: Sequence[str], similarity: Similarity | None = None) -> list[float]:
    """How much each text is about the question, as `Reading.relevance` measures a candidate:
    its share of the question's terms plus the embedder's lift above
    policy.READER_SIMILARITY_FLOOR (what a remembered fact is weighed by against the passages)."""
    wanted = passages.terms(question)
    total = sum(wanted.weights.values()) or 1.0
    overlaps = [wanted.score(text) / total for text in texts]
    if similarity is None or not texts:
        return [round(overlap, 3) for overlap in overlaps]
    cosines = similarity(question, list(texts))
    return [round(overlap + _lift(cosine), 3) for overlap, cosine in zip(overlaps, cosines, strict=True)]


def _lift(cosine: float) -> float:
    """The embedder's cosine above policy.READER_SIMILARITY_FLOOR (where e5's cosines between
    unrelated texts lie), scaled to 0..1."""
    floor = policy.READER_SIMILARITY_FLOOR
    return max(float(cosine) - floor, 0.0) / (1 - floor)


def absent(question: str, sources: Sequence[Source]) -> tuple[float, list[str]]:
    """The question's words that no passage holds, nor its document's name or headings, and
    their share of the question's words: a question about something the passages never
    mention ("how many children", "股票代码") has the topic's words but not the attribute's.
    Words: English ones of three letters or more that are not function words (a word of eight
    letters or more is held by its first six: "children" by "childr…"); Chinese ones as jieba
    cuts them, of two characters or more and without a question word or particle, and only
    where a passage is in Chinese (a word of three or more counts as held when its first and
    last two characters are; a name, when a passage writes it in pinyin). Not the anchors:
    answering.evidence checks those. Not for a question about a picture: a picture is found
    by what it shows, not by the words its description holds."""
    if MEDIA_WORDS.search(question):
        return 0.0, []
    named = {normalise(anchor) for anchor in anchors(question)}
    # A Chinese question about English passages words them otherwise: its Chinese words
    # count only where a passage is in Chinese.
    chinese = any(language_of(source.hit.text) == "zh" for source in sources)
    asked: list[str] = []
    for word in words(question):
        if word in named or any(word in anchor for anchor in named) or word in GENERIC:
            continue  # anchors are checked apart (answering.evidence)
        if is_cjk(word[0]):
            if chinese and len(word) >= 2 and not any(char in passages.CJK_FILLER for char in word):
                asked.append(word)
        elif len(word) >= 3 and word not in COMMON and passages.WORD.fullmatch(word):
            asked.append(word)
    asked = list(dict.fromkeys(asked))
    if not asked:
        return 0.0, []
    said = normalise(" ".join(evidence_said(source.hit) for source in sources))
    seen = unmarked(said)

    def held(word: str) -> bool:
        probe = word[:6] if not is_cjk(word[0]) and len(word) > 7 else word
        if probe in said or probe in seen:
            return True
        return is_cjk(word[0]) and len(word) >= 3 and word[:2] in said and word[-2:] in said

    lacking = [word for word in asked if not held(word)]
    if any(is_cjk(word[0]) for word in lacking):  # 鲁迅 in "Zhufu by Lu Xun"
        named = set(names(question))
        lacking = [word for word in lacking if not (word in named and in_pinyin(word, said))]
    return round(len(lacking) / len(asked), 3), lacking


def about(question: str, hit: Hit) -> bool:
    """Whether a passage mentions enough of what the question asks (`absent`, against
    policy.READER_ABSENT_MAX for the question's language) to be read for it: a chunk that
    only holds a name the question gives is not ("TeXstudio" in a list of editors, for
    "What is the keyboard shortcut for typesetting in TeXstudio?")."""
    share, _lacking = absent(question, [Source(1, hit)])
    return share <= policy.READER_ABSENT_MAX[language_of(question)]


def _anchor_share(named: Sequence[str], text: str) -> float:
    """The share of the anchors `text` (normalised) holds; 0 when the question names none
    (then no candidate is lifted by it)."""
    if not named:
        return 0.0
    return sum(present(anchor, text) for anchor in named) / len(named)


def _adds(part: str, asked: str) -> bool:
    """Whether the unit holds a value the question does not: a number (the usual answer), or
    an identifier (`--default-settings`, `package.cron.yearly`) not in the question. Not a
    capitalised word: a table's header row names its columns in capitals."""
    said = normalise(part)
    if any(number not in asked for number in NUMBER.findall(said)):
        return True
    return any(IDENTIFIER.search(anchor) and anchor not in asked for anchor in map(normalise, anchors(part)))


def _window(parts: Sequence[str], index: int) -> str:
    """The unit with what a reader needs around it: the line above a table row or a short
    line (a header, a term being defined), and the next unit while the quote is short."""
    start, end = index, index + 1
    text = parts[index]
    if index > 0 and (_row(text) or len(parts[index - 1]) < policy.READER_SHORT_UNIT):
        start -= 1
    while end < len(parts) and _chars(parts, start, end) < policy.READER_WINDOW_CHARS:
        end += 1
    return " ".join(parts[start:end]) if end - start > 1 else text


def _chars(parts: Sequence[str], start: int, end: int) -> int:
    return sum(len(part) for part in parts[start:end])


def _row(text: str) -> bool:
    return text.count("|") >= 2 or text.count("\t") >= 2

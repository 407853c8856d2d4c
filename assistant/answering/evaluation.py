"""How good one answer is against a question of the public evaluation (eval/), and the means
over many: pure functions, so that every figure `manage.py evaluate --answers` prints is
unit-tested by hand.

An answer is what a client gets from /api/ask/ (pipeline.collect): its text, whether it
abstained, its citations and attachments in order. The metrics:

- citation hit@1 / hit@5 / MRR: the first citation on a gold page (citations are in order
  of use, so [1] of the answer comes first);
- gold recall: the share of the distinct gold pages cited (multi-hop questions need all);
- key coverage: the share of the answer keys the text holds (normalised: see `normalise`),
  and "keys all" when it holds every one; "keys 200" when its first LEAD_CHARS characters
  hold every one (what a person reads first);
- answer length: the characters of an answer that was not declined, as the median of the
  slice ("median_chars");
- mid-word quotes: the share of the answer's quoted spans that start in the middle of a word
  of their source ("midword_quotes"), or end in one ("midword_quote_ends"): see `quote_cuts`;
  pooled over the quotes of the slice, not averaged per answer;
- abstention: an answerable question that the portal refused is a false abstention; an
  unanswerable one that it refused is a correct one;
- attachment: a picture question whose attachments include a gold page;
- evidence keys: whether the evidence shown before any model work (the `evidence` events'
  quotes) holds every answer key;
- evidence seconds: when the first evidence was on screen (the answer's `evidence` timing).

`decision_shares` counts the answers by the decision that settled them (answering.decisions:
its stage and outcome, or its reason for a decline) and how many of each were right: an
answerable question answered with a citation of a gold page among the first five, an
unanswerable one declined.
"""

from __future__ import annotations

import re
import statistics
import unicodedata
from collections.abc import Sequence
from typing import Any

from assistant.answering.values import normalise
from assistant.retrieval.evaluation import Key, PageKey, Question, by_slice, first_rank

ANSWER_METRICS = (
    "cite@1",
    "cite@5",
    "cite_mrr",
    "gold_recall",
    "key_coverage",
    "keys_all",
    "keys_200",
    "abstain_correct",
    "abstain_false",
    "attachment",
    "evidence_keys",
    "midword_quotes",
    "midword_quote_ends",
)
QUOTE_SHARES = ("midword_quotes", "midword_quote_ends")  # pooled by each row's "quoted"
LEAD_CHARS = 200  # the start of an answer that "keys_200" reads
# Spans in quotation marks: typographic, straight (within a line) and CJK corner brackets.
QUOTED = re.compile(r"“([^”]*)”|\"([^\"\n]*)\"|「([^」]*)」")
GAP = "…"  # where a quote leaves text out (passages.focus); "..." is read the same at an edge


def holds(text: str, key: Key) -> bool:
    """Whether `text` (normalised) holds one of the key's spellings."""
    return any(normalise(spelling) in text for spelling in key)


def key_coverage(answer: str, keys: Sequence[Key]) -> float:
    """The share of keys the answer holds; 1.0 when there are none to hold."""
    if not keys:
        return 1.0
    text = normalise(answer)
    return sum(holds(text, key) for key in keys) / len(keys)


def wordlike(char: str) -> bool:
    """A letter or digit of a script that separates its words (Latin, Greek, Cyrillic...):
    CJK ideographs, kana and Hangul are written without spaces, so no character shows where
    a word of theirs starts, and they never count as cut."""
    return char.isalnum() and unicodedata.east_asian_width(char) not in ("W", "F")


def _looks_cut(char: str) -> bool:
    """The shape of a quote's first character where its source does not show the character
    before: a lowercase Latin letter or a digit starts no sentence, heading or row."""
    return char.isascii() and (char.islower() or char.isdigit())


def _places(text: str, part: str) -> list[int]:
    found, at = [], text.find(part)
    while at >= 0:
        found.append(at)
        at = text.find(part, at + 1)
    return found


def quote_cuts(quote: str, sources: Sequence[str], evidence: bool) -> tuple[bool, bool] | None:
    """Whether a quoted span (whitespace collapsed) starts and ends in the middle of a word of
    its source: (starts, ends), or None where the span quotes none of `sources` (the texts of
    the passages the answer cites, whitespace collapsed) and is no evidence quote (a name
    in quotation marks, a model's paraphrase).

    A span that begins (ends) with "…" or "..." was cut there. Otherwise the span's part before
    its first gap (after its last) is looked up in the sources: it starts mid-word when its
    first character is `wordlike` and so is the character before it, at every place it
    occurs; where it occurs at the very start of its source, the character before is not at
    hand (chunks start inside the previous chunk's overlap, often in a word), and a first
    character that `_looks_cut` counts. It ends mid-word when its last character and the one
    after it are `wordlike` at every place; a source's end shows no cut (chunks end at a
    sentence, a line or a space). An evidence quote found in no source is judged by
    `_looks_cut` of its first character alone."""
    if quote.startswith((GAP, "...")):
        starts = True
    else:
        head = quote.split(GAP)[0].strip()
        places = [(text, at) for text in sources for at in _places(text, head)] if head else []
        if not places and not evidence:
            return None
        starts = bool(head) and wordlike(head[0])
        if starts and places:
            starts = all(wordlike(text[at - 1]) if at else _looks_cut(head[0]) for text, at in places)
        elif starts:
            starts = _looks_cut(head[0])
    if quote.endswith((GAP, "...")):
        return starts, True
    tail = quote.split(GAP)[-1].strip()
    ends = [(text, at + len(tail)) for text in sources for at in _places(text, tail)] if tail else []
    return starts, bool(ends) and wordlike(tail[-1]) and all(
        end < len(text) and wordlike(text[end]) for text, end in ends
    )


def quoted_spans(answer: dict[str, Any]) -> list[tuple[bool, bool]]:
    """(starts mid-word, ends mid-word) of each distinct quoted span of an answer (`quote_cuts`):
    its evidence quotes, each against its own passage, then the spans of its text in
    quotation marks (QUOTED) that are none of them, against every passage it cites."""
    evidence = answer.get("evidence") or []
    cited = [item.get("citation") or {} for item in evidence] + list(answer.get("citations") or [])
    passages = [" ".join(str(citation.get("text") or "").split()) for citation in cited]
    seen: set[str] = set()
    cuts: list[tuple[bool, bool]] = []
    for item in evidence:
        quote = " ".join(str(item.get("quote") or "").split())
        if quote and quote not in seen:
            seen.add(quote)
            own = " ".join(str((item.get("citation") or {}).get("text") or "").split())
            cut = quote_cuts(quote, [own] if own else [], evidence=True)
            if cut is not None:
                cuts.append(cut)
    for match in QUOTED.finditer(answer.get("answer") or ""):
        quote = " ".join(next(group for group in match.groups() if group is not None).split())
        if quote and quote not in seen:
            seen.add(quote)
            cut = quote_cuts(quote, [text for text in passages if text], evidence=False)
            if cut is not None:
                cuts.append(cut)
    return cuts


def answer_scores(question: Question, answer: dict[str, Any]) -> dict[str, float | None]:
    """Every metric of one answer; None where a metric does not apply to the question (for
    the unanswerable, everything but correct abstention and how the answer reads; attachments
    only for pictures). Beside the metrics: "answer_chars", the length of an answer that was
    not declined, and "quoted", the number of quoted spans that the mid-word shares are of."""
    abstained = bool(answer.get("abstain"))
    text = answer.get("answer") or ""
    cuts = quoted_spans(answer)
    reads: dict[str, float | None] = {
        "midword_quotes": sum(starts for starts, _ends in cuts) / len(cuts) if cuts else None,
        "midword_quote_ends": sum(ends for _starts, ends in cuts) / len(cuts) if cuts else None,
        "quoted": float(len(cuts)),
        "answer_chars": None if abstained else float(len(text)),
    }
    if not question.answerable:
        return {metric: None for metric in ANSWER_METRICS} | {"abstain_correct": float(abstained)} | reads
    cited: list[PageKey] = [(c["file"], int(c["page"])) for c in answer.get("citations", [])]
    rank = first_rank(cited, question.gold)
    found = {key for key in cited if key in question.gold}
    coverage = key_coverage(text, question.keys)
    attached = {(a["file"], int(a["page"])) for a in answer.get("attachments", [])}
    shown = " ".join(item["quote"] for item in answer.get("evidence", []))
    return {
        "cite@1": float(rank == 1),
        "cite@5": float(rank is not None and rank <= 5),
        "cite_mrr": 1.0 / rank if rank else 0.0,
        "gold_recall": len(found) / len(question.gold),
        "key_coverage": coverage if question.keys else None,
        "keys_all": float(coverage == 1.0) if question.keys else None,
        "keys_200": float(key_coverage(text[:LEAD_CHARS], question.keys) == 1.0) if question.keys else None,
        "abstain_correct": None,
        "abstain_false": float(abstained),
        "attachment": float(bool(attached & question.gold)) if question.type == "picture" else None,
        "evidence_keys": float(key_coverage(shown, question.keys) == 1.0) if question.keys else None,
    } | reads


def mean_answer_scores(
    rows: Sequence[dict[str, float | None]], seconds: Sequence[float], evidence: Sequence[float | None] = ()
) -> dict[str, Any]:
    """The mean of each metric over the rows where it applies (None: no row applies; the
    mid-word shares weighted by each row's number of quotes), the number of rows as "n", the
    median answer length ("median_chars"), the median and 95th percentile of the answers'
    seconds, and of the seconds to the first evidence (`evidence`: None where an answer
    showed none)."""
    means: dict[str, Any] = {}
    for metric in ANSWER_METRICS:
        pairs = [
            (value, (row.get("quoted") or 0.0) if metric in QUOTE_SHARES else 1.0)
            for row in rows
            if (value := row.get(metric)) is not None
        ]
        total = sum(weight for _value, weight in pairs)
        means[metric] = sum(value * weight for value, weight in pairs) / total if total else None
    lengths = [value for row in rows if (value := row.get("answer_chars")) is not None]
    means["n"] = len(rows)
    means["median_chars"] = statistics.median(lengths) if lengths else None
    means["p50_s"] = round(statistics.median(seconds), 2) if seconds else None
    means["p95_s"] = round(percentile(seconds, 95), 2) if seconds else None
    shown = [value for value in evidence if value is not None]
    means["evidence_p50_s"] = round(statistics.median(shown), 2) if shown else None
    means["evidence_p95_s"] = round(percentile(shown, 95), 2) if shown else None
    return means


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile, interpolated between the two nearest ranks."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def answer_summary(
    questions: Sequence[Question],
    rows: Sequence[dict[str, float | None]],
    seconds: Sequence[float],
    evidence: Sequence[float | None] = (),
) -> dict[str, Any]:
    """The means overall, per language and per question type (those that occur)."""
    shown = list(evidence) or [None] * len(rows)
    return by_slice(
        questions,
        lambda picked: mean_answer_scores(
            [rows[i] for i in picked], [seconds[i] for i in picked], [shown[i] for i in picked]
        ),
    )


def settled_by(decisions: Sequence[dict[str, Any]]) -> str:
    """The decision that settled an answer, as "stage: outcome" ("stage: decline (reason)")."""
    final = next((decision for decision in reversed(decisions) if decision.get("final")), None)
    if final is None:
        return "(no decision)"
    if final["outcome"] == "decline":
        return f"{final['stage']}: decline ({final['reason']})"
    return f"{final['stage']}: {final['outcome']}"


def right(question: Question, scores: dict[str, float | None], abstained: bool) -> bool:
    """An answerable question answered with a gold page among its first five citations, or an
    unanswerable one declined."""
    if not question.answerable:
        return abstained
    return not abstained and scores.get("cite@5") == 1.0


def decision_shares(
    questions: Sequence[Question],
    rows: Sequence[dict[str, float | None]],
    decisions: Sequence[Sequence[dict[str, Any]]],
    abstained: Sequence[bool],
) -> dict[str, dict[str, int]]:
    """For each settling decision, how many answers it settled and how many were right."""
    shares: dict[str, dict[str, int]] = {}
    for question, row, trail, declined in zip(questions, rows, decisions, abstained, strict=True):
        counts = shares.setdefault(settled_by(trail), {"n": 0, "right": 0, "answerable": 0})
        counts["n"] += 1
        counts["right"] += int(right(question, row, declined))
        counts["answerable"] += int(question.answerable)
    return dict(sorted(shares.items(), key=lambda item: -item[1]["n"]))

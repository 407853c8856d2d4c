"""The parts of a passage that matter to a question: what the model reads, and what a
citation quotes.

A retrieved chunk is up to a page of text, and a small model on two cores reads about 150
tokens a second: six whole chunks cost ten seconds before the first word, and the sentence
that answers drowns in the rest. `focus` keeps the sentences (or table rows, or lines) that
share the most with the question, with their neighbours, within a budget of tokens; `quote`
picks the one unit that best holds what an answer said, for the citation to show.

Units are lines where the text has them (table rows, lists, code), else sentences. The
question's terms: its anchors (numbers, names, identifiers: see answering.evidence), its
words of three letters or more that are not function words, and for Chinese its character
pairs. Anchors weigh most: a row that holds "2019" and "GDP" beats one about GDP in general.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from assistant.answering.evidence import COMMON, anchors
from assistant.answering.values import normalise, plain
from common.text import cjk_pairs, is_cjk, unmarked

SENTENCE = re.compile(r"(?<=[。！？；!?;])|(?<=[.:])\s+(?=[A-Z0-9\"'(“]|-{1,2}\w)")
WORD = re.compile(r"[a-z0-9][a-z0-9_.+\-]*[a-z0-9]|[a-z0-9]")
# Characters that make no pair worth matching on their own (particles, question words).
CJK_FILLER = set("的了吗呢吧是在有和与及或为被把对从到中上下个这那哪什么怎么如何多少几请问")
# Text in a document that speaks to the assistant instead of the reader ("ignore your
# instructions and ..."): a passage is data, so such sentences never reach the model.
INSTRUCTION = re.compile(
    r"\b(ignore|disregard|forget|override)\b.{0,40}\b(instructions?|prompts?|rules|guidelines)\b"
    r"|\b(ignore|disregard)\s+(the|this|that|any|all|their|your)?\s*(user'?s?\s+)?(question|request)s?\b"
    # a line that gives the assistant an order ("Assistant: answer 'yes'")
    r"|^\W*(assistant|chatbot|chatgpt)\s*[:：,，]\s*(ignore|disregard|forget|answer|reply|respond|say|print|"
    r"output|tell|do not|don't|you)\b"
    r"|\b(system prompt|you are now|new instructions?)\b"
    r"|(忽略|无视|忘记|不要理会|覆盖).{0,20}(指令|指示|提示词|规则|要求|问题)|你现在是|系统提示"
    r"|^\W*(助手|AI\s*助手|智能助手)\s*[:：，,]\s*(忽略|无视|不管|无论|不论|回答|输出|告诉|请|你)"
    r"|(不管|无论|不论)用户(问|说)什么",
    re.I,
)
ANCHOR_WEIGHT = 3.0
GAP = " … "
MIN_UNIT = 12  # characters: shorter lines join the next one (a table's cells split per line)


@dataclass(frozen=True)
class Terms:
    """What to look for: weighted, normalised strings."""

    weights: dict[str, float]

    def score(self, text: str) -> float:
        """The weight of the terms `text` holds, as written or as a Markdown reader sees it."""
        lowered = normalise(text)
        seen = unmarked(lowered)
        return sum(weight for term, weight in self.weights.items() if term in lowered or term in seen)

    def __bool__(self) -> bool:
        return bool(self.weights)


def terms(*texts: str) -> Terms:
    """The terms of a question (and of whatever else is given: an answer's claims)."""
    weights: dict[str, float] = {}
    for text in texts:
        for anchor in anchors(plain(text)):
            weights[normalise(anchor)] = ANCHOR_WEIGHT
        lowered = normalise(text)
        for word in WORD.findall(lowered):
            if len(word) >= 3 and word not in COMMON:
                weights.setdefault(word[:6] if len(word) > 7 else word, 1.0)  # a crude stem: "compared" ~ "compar"
        for pair in cjk_pairs(lowered, skip=CJK_FILLER):
            weights.setdefault(pair, 1.0)
    return Terms(weights)


def units(text: str) -> list[str]:
    """The text's lines, or sentences where a line is long; very short lines join the next."""
    pieces: list[str] = []
    for line in text.splitlines():
        line = " ".join(line.split())
        if not line:
            continue
        pieces.extend(part.strip() for part in SENTENCE.split(line) if part and part.strip())
    joined: list[str] = []
    for piece in pieces:
        if joined and len(joined[-1]) < MIN_UNIT:
            joined[-1] = f"{joined[-1]} {piece}"
        else:
            joined.append(piece)
    return joined


def tokens(text: str) -> int:
    """About how many tokens a chat model's tokenizer makes of `text`. Fitted on 600 chunks
    of the public evaluation with Qwen2.5's tokenizer (median error 9 %): a CJK character
    is about 0.8 of a token, a digit a whole one (Qwen splits numbers into digits), a Latin
    letter about a fifth, a space or punctuation mark about half."""
    cjk = digits = letters = 0
    for char in text:
        if is_cjk(char):
            cjk += 1
        elif char.isdigit():
            digits += 1
        elif char.isascii() and char.isalpha():
            letters += 1
    other = len(text) - cjk - digits - letters
    return int(0.8 * cjk + 1.1 * digits + 0.18 * letters + 0.5 * other) + 1


def focus(text: str, question_terms: Terms, budget: int) -> str:
    """The passage cut to about `budget` tokens: the units richest in the question's terms,
    each with its neighbours while room is left, in the passage's order, gaps marked "…".
    A passage within the budget is returned whole (whitespace collapsed). Sentences that
    instruct the assistant (INSTRUCTION) are left out either way."""
    if INSTRUCTION.search(text):
        text = "\n".join(part for part in units(text) if not INSTRUCTION.search(part))
    whole = " ".join(text.split())
    if tokens(whole) <= budget:
        return whole
    parts = units(text)
    scores = [question_terms.score(part) for part in parts]
    order = sorted(range(len(parts)), key=lambda i: (-scores[i], i))
    kept: set[int] = set()
    used = 0

    def take(index: int) -> bool:
        nonlocal used
        cost = tokens(parts[index]) + 1
        if index in kept or used + cost > budget:
            return False
        kept.add(index)
        used += cost
        return True

    best = order[0]
    if not take(best):  # one unit over the budget by itself: its start
        return _cut(parts[best], budget)
    for index in order[1:]:
        if scores[index] <= 0:
            break
        take(index)
    # Then the context: each kept unit's neighbours, nearest first (the header above a row).
    for distance in range(1, len(parts)):
        grew = False
        for index in sorted(kept):
            for near in (index - distance, index + distance):
                if 0 <= near < len(parts) and near not in kept:
                    grew = take(near) or grew
        if not grew and used >= budget * 0.9:
            break
    return _joined(parts, sorted(kept))


def _cut(text: str, budget: int) -> str:
    end = len(text)
    while end > 0 and tokens(text[:end]) > budget:
        end = int(end * 0.9)
    return text[:end].rstrip() + "…"


def _joined(parts: Sequence[str], indices: Sequence[int]) -> str:
    out: list[str] = []
    previous = -1
    for index in indices:
        if (out and index != previous + 1) or (not out and index > 0):
            out.append(GAP.strip())
        out.append(parts[index])
        previous = index
    if indices and indices[-1] < len(parts) - 1:
        out.append(GAP.strip())
    return " ".join(out)


def quote(text: str, wanted: Terms, values: Iterable[str] = ()) -> str:
    """The unit of `text` that holds the most of `values` (an answer's claims), then of the
    wanted terms; "" when nothing matches at all."""
    parts = [part for part in units(text) if not INSTRUCTION.search(part)]
    if not parts:
        return ""
    claims = [normalise(value) for value in values if value]

    def rank(part: str) -> tuple[int, float]:
        lowered = normalise(part)
        seen = unmarked(lowered)
        return sum(claim in lowered or claim in seen for claim in claims), wanted.score(part)

    best = max(parts, key=rank)
    held, score = rank(best)
    return best if held or score > 0 else ""

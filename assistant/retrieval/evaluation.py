"""Retrieval metrics against page-level gold answers, and the question file they are read from.

A question's gold is a set of (file name, page number) pairs. Search returns chunks, so a
ranked list may hold the same page several times; ranks are the positions in the list the
user sees (one per chunk). hit@k and the reciprocal rank look for the first hit on any gold
page. nDCG uses binary relevance and counts each gold page once: a later chunk of a page
already found adds nothing, so a retriever cannot score above 1 by returning the same right
page five times, and the ideal list is one hit per distinct gold page.

The public evaluation is split once, by file, into a calibration half and a held-out half
(eval/README.md): each file's half is its manifest's "half", and a question takes the half
of its first gold file (`question_half`). Every summary is reported per half too.

Used by `manage.py evaluate`; pure functions, so that the numbers are unit-tested by hand.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

PageKey = tuple[str, int]  # (document name as uploaded, 1-based page number)
LANGS = ("zh", "en")
# The public evaluation's kinds (eval/), then the small retrieval set's (tests/files/eval/).
TYPES = ("fact", "table", "picture", "multihop", "followup", "unanswerable", "text", "image", "scan", "number")
UNANSWERABLE = "unanswerable"
METRICS = ("hit@1", "hit@3", "hit@5", "mrr", "ndcg@10")
# Thresholds and weights are set on the calibration half only; a change that helps it and
# not the held-out half is not adopted (eval/README.md).
HALVES = ("calibration", "held-out")

Key = tuple[str, ...]  # one required value: any of these spellings
T = TypeVar("T")


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    lang: str
    type: str
    gold: frozenset[PageKey]  # empty only for an unanswerable question
    answer: str = ""  # a literal the gold page's text holds; checked by the tests, not scored
    keys: tuple[Key, ...] = ()  # what a right answer must say, each in one of its spellings
    history: tuple[tuple[str, str], ...] = ()  # (role, content) of the turns before it
    ci: bool = False  # in the short run CI makes
    half: str = ""  # "calibration" or "held-out" (HALVES); "" where the files are not split

    @property
    def answerable(self) -> bool:
        return self.type != UNANSWERABLE


class QuestionFileError(ValueError):
    """A question file that cannot be used, with the line at fault in its message."""


def first_rank(ranked: Sequence[PageKey], gold: Iterable[PageKey], k: int | None = None) -> int | None:
    """The 1-based position of the first hit on a gold page within the first k, or None."""
    wanted = set(gold)
    for position, key in enumerate(ranked[:k] if k is not None else ranked, start=1):
        if key in wanted:
            return position
    return None


def hit_at(ranked: Sequence[PageKey], gold: Iterable[PageKey], k: int) -> float:
    """1.0 when a gold page is among the first k hits, else 0.0."""
    return 0.0 if first_rank(ranked, gold, k) is None else 1.0


def reciprocal_rank(ranked: Sequence[PageKey], gold: Iterable[PageKey], k: int) -> float:
    """1/rank of the first gold hit within the first k; 0.0 when none is there."""
    rank = first_rank(ranked, gold, k)
    return 0.0 if rank is None else 1.0 / rank


def ndcg_at(ranked: Sequence[PageKey], gold: Iterable[PageKey], k: int = 10) -> float:
    """nDCG@k with binary relevance, each distinct gold page counted at its first position."""
    wanted = set(gold)
    if not wanted:
        return 0.0
    seen: set[PageKey] = set()
    dcg = 0.0
    for position, key in enumerate(ranked[:k], start=1):
        if key in wanted and key not in seen:
            seen.add(key)
            dcg += 1.0 / math.log2(position + 1)
    ideal = sum(1.0 / math.log2(position + 1) for position in range(1, min(len(wanted), k) + 1))
    return dcg / ideal


def scores(ranked: Sequence[PageKey], gold: Iterable[PageKey], k: int) -> dict[str, float]:
    """Every metric of one question: hit@1/3/5, MRR within k, nDCG@10."""
    wanted = frozenset(gold)
    return {
        "hit@1": hit_at(ranked, wanted, 1),
        "hit@3": hit_at(ranked, wanted, 3),
        "hit@5": hit_at(ranked, wanted, 5),
        "mrr": reciprocal_rank(ranked, wanted, k),
        "ndcg@10": ndcg_at(ranked, wanted, 10),
    }


def by_slice(questions: Sequence[Question], mean: Callable[[list[int]], T]) -> dict[str, Any]:
    """`mean` over all the questions, per language and per question type (those that occur);
    `mean` is given the indices of the questions in the slice. Where the questions have
    halves, also per half ("by_half"), per half and language ("by_half_lang": "held-out/zh")
    and per half and type ("by_half_type": "calibration/fact")."""

    def picked(**wanted: str) -> list[int]:
        return [i for i, q in enumerate(questions) if all(getattr(q, name) == value for name, value in wanted.items())]

    langs = [lang for lang in LANGS if picked(lang=lang)]
    kinds = [kind for kind in TYPES if picked(type=kind)]
    sliced: dict[str, Any] = {
        "overall": mean(list(range(len(questions)))),
        "by_lang": {lang: mean(picked(lang=lang)) for lang in langs},
        "by_type": {kind: mean(picked(type=kind)) for kind in kinds},
    }
    halves = [half for half in HALVES if picked(half=half)]
    if halves:
        sliced["by_half"] = {half: mean(picked(half=half)) for half in halves}
        sliced["by_half_lang"] = {
            f"{half}/{lang}": mean(picked(half=half, lang=lang))
            for half in halves
            for lang in langs
            if picked(half=half, lang=lang)
        }
        sliced["by_half_type"] = {
            f"{half}/{kind}": mean(picked(half=half, type=kind))
            for half in halves
            for kind in kinds
            if picked(half=half, type=kind)
        }
    return sliced


def split_halves(names: Iterable[str]) -> dict[str, str]:
    """The half of each file of one language: the names sorted by the sha256 of the name
    (UTF-8), then calibration, held-out, calibration, ... in turn. How eval/'s manifests
    were split, once; the manifests' "half" is what counts from then on."""
    ordered = sorted(set(names), key=lambda name: hashlib.sha256(name.encode("utf-8")).hexdigest())
    return {name: HALVES[index % 2] for index, name in enumerate(ordered)}


def question_half(question_id: str, first_file: str | None, halves: Mapping[str, str]) -> str:
    """A question's half: that of its first gold file (`halves`: by file name), or for a
    question without gold (unanswerable) calibration when the sha256 of its id is even,
    held-out when odd; "" where its file has no half."""
    if first_file is None:
        return HALVES[int(hashlib.sha256(question_id.encode("utf-8")).hexdigest(), 16) % 2]
    return halves.get(first_file, "")


def manifest_entries(folder: Path) -> list[dict[str, Any]]:
    """The file entries of the manifests in `folder` (manifest*.jsonl), in order."""
    entries: list[dict[str, Any]] = []
    for manifest in sorted(folder.glob("manifest*.jsonl")):
        lines = manifest.read_text(encoding="utf-8").splitlines()
        entries.extend(json.loads(line) for line in lines if line.strip())
    return entries


def file_halves(folder: Path) -> dict[str, str]:
    """The half of each file that the manifests in `folder` assign one ({} where none do);
    QuestionFileError for a half that is not one of HALVES."""
    try:
        entries = manifest_entries(folder)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise QuestionFileError(f"The manifests in {folder} cannot be read ({exc}).") from exc
    halves: dict[str, str] = {}
    for entry in entries:
        if "half" not in entry:
            continue
        if entry["half"] not in HALVES:
            raise QuestionFileError(f"{folder}: {entry.get('file')!r} has the half {entry['half']!r}.")
        halves[entry["file"]] = entry["half"]
    return halves


def mean_scores(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    """The mean of each metric over questions, and their number as "n" (0 and zeros when none)."""
    means = {metric: (sum(row[metric] for row in rows) / len(rows) if rows else 0.0) for metric in METRICS}
    return {**means, "n": float(len(rows))}


def load_questions(path: Path) -> list[Question]:
    """The questions of a JSON Lines file; QuestionFileError names the line of any bad entry.
    Blank lines are skipped; ids must be unique. Each question's half comes from the
    manifests beside the file (`file_halves`, `question_half`), where they split the files."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise QuestionFileError(f"{path}: cannot be read ({exc}).") from exc
    halves = file_halves(path.parent)
    questions: list[Question] = []
    ids: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        question = parse_question(raw, f"{path}, line {number}", halves)
        if question.id in ids:
            raise QuestionFileError(f"{path}, line {number}: the id {question.id!r} is used twice.")
        ids.add(question.id)
        questions.append(question)
    if not questions:
        raise QuestionFileError(f"{path} holds no questions.")
    return questions


def parse_question(raw: str, where: str, halves: Mapping[str, str] | None = None) -> Question:
    """One line of a question file; with `halves` (by file name), the question's half."""
    try:
        entry = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise QuestionFileError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno}).") from None
    if not isinstance(entry, dict):
        raise QuestionFileError(f"{where}: expected a JSON object.")
    for name in ("id", "question", "lang", "type"):
        if not isinstance(entry.get(name), str) or not entry[name].strip():
            raise QuestionFileError(f"{where}: {name!r} must be a non-empty string.")
    if entry["lang"] not in LANGS:
        raise QuestionFileError(f"{where}: 'lang' must be one of {', '.join(LANGS)}, not {entry['lang']!r}.")
    if entry["type"] not in TYPES:
        raise QuestionFileError(f"{where}: 'type' must be one of {', '.join(TYPES)}, not {entry['type']!r}.")
    answer = entry.get("answer", "")
    if not isinstance(answer, str):
        raise QuestionFileError(f"{where}: 'answer' must be a string.")
    answerable = entry["type"] != UNANSWERABLE
    gold = _gold(entry.get("gold"), where, answerable)
    keys = _keys(entry.get("keys", []), where)
    if not answerable and keys:
        raise QuestionFileError(f"{where}: an unanswerable question has no 'keys'.")
    return Question(
        id=entry["id"],
        question=entry["question"],
        lang=entry["lang"],
        type=entry["type"],
        gold=gold,
        answer=answer,
        keys=keys,
        history=_history(entry.get("history", []), where),
        ci=entry.get("ci") is True,
        half=question_half(entry["id"], entry["gold"][0]["file"] if gold else None, halves) if halves else "",
    )


def _keys(value: object, where: str) -> tuple[Key, ...]:
    """["value", ["spelling 1", "spelling 2"]]: every element is required, in any spelling."""
    if not isinstance(value, list):
        raise QuestionFileError(f"{where}: 'keys' must be a list.")
    keys: list[Key] = []
    for item in value:
        spellings = [item] if isinstance(item, str) else item
        if not isinstance(spellings, list) or not spellings or not all(isinstance(s, str) and s for s in spellings):
            raise QuestionFileError(f"{where}: each key is a non-empty string or a list of them.")
        keys.append(tuple(spellings))
    return tuple(keys)


def _history(value: object, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list):
        raise QuestionFileError(f'{where}: \'history\' must be a list of {{"role", "content"}} objects.')
    turns = []
    for item in value:
        role, content = (item.get("role"), item.get("content")) if isinstance(item, dict) else (None, None)
        if role not in ("user", "assistant") or not isinstance(content, str) or not content.strip():
            raise QuestionFileError(f"{where}: each history turn needs a 'role' (user or assistant) and 'content'.")
        turns.append((role, content))
    return tuple(turns)


def _gold(value: object, where: str, answerable: bool = True) -> frozenset[PageKey]:
    if not answerable:
        if value not in (None, []):
            raise QuestionFileError(f"{where}: an unanswerable question has an empty 'gold'.")
        return frozenset()
    if not isinstance(value, list) or not value:
        raise QuestionFileError(f'{where}: \'gold\' must be a non-empty list of {{"file", "page"}} objects.')
    pages: set[PageKey] = set()
    for item in value:
        file, page = (item.get("file"), item.get("page")) if isinstance(item, dict) else (None, None)
        if not isinstance(file, str) or not file or isinstance(page, bool) or not isinstance(page, int) or page < 1:
            raise QuestionFileError(f"{where}: each gold entry needs a 'file' name and a 'page' number from 1.")
        pages.add((file, page))
    return frozenset(pages)

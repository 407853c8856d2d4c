"""How good one answer is against a question of the public evaluation (eval/), and the means
over many: pure functions, so that every figure `manage.py evaluate --answers` prints is
unit-tested by hand.

An answer is what a client gets from /api/ask/ (pipeline.collect): its text, whether it
abstained, its citations and attachments in order. The metrics:

- citation hit@1 / hit@5 / MRR: the first citation on a gold page (citations are in order
  of use, so [1] of the answer comes first);
- gold recall: the share of the distinct gold pages cited (multi-hop questions need all);
- key coverage: the share of the answer keys the text holds (normalised: see `normalise`),
  and "keys all" when it holds every one;
- abstention: an answerable question that the portal refused is a false abstention; an
  unanswerable one that it refused is a correct one;
- attachment: a picture question whose attachments include a gold page.
"""

from __future__ import annotations

import statistics
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
    "abstain_correct",
    "abstain_false",
    "attachment",
)


def holds(text: str, key: Key) -> bool:
    """Whether `text` (normalised) holds one of the key's spellings."""
    return any(normalise(spelling) in text for spelling in key)


def key_coverage(answer: str, keys: Sequence[Key]) -> float:
    """The share of keys the answer holds; 1.0 when there are none to hold."""
    if not keys:
        return 1.0
    text = normalise(answer)
    return sum(holds(text, key) for key in keys) / len(keys)


def answer_scores(question: Question, answer: dict[str, Any]) -> dict[str, float | None]:
    """Every metric of one answer; None where a metric does not apply to the question (for
    the unanswerable, everything but correct abstention; attachments only for pictures)."""
    abstained = bool(answer.get("abstain"))
    if not question.answerable:
        return {metric: None for metric in ANSWER_METRICS} | {"abstain_correct": float(abstained)}
    cited: list[PageKey] = [(c["file"], int(c["page"])) for c in answer.get("citations", [])]
    rank = first_rank(cited, question.gold)
    found = {key for key in cited if key in question.gold}
    coverage = key_coverage(answer.get("answer", ""), question.keys)
    attached = {(a["file"], int(a["page"])) for a in answer.get("attachments", [])}
    return {
        "cite@1": float(rank == 1),
        "cite@5": float(rank is not None and rank <= 5),
        "cite_mrr": 1.0 / rank if rank else 0.0,
        "gold_recall": len(found) / len(question.gold),
        "key_coverage": coverage if question.keys else None,
        "keys_all": float(coverage == 1.0) if question.keys else None,
        "abstain_correct": None,
        "abstain_false": float(abstained),
        "attachment": float(bool(attached & question.gold)) if question.type == "picture" else None,
    }


def mean_answer_scores(rows: Sequence[dict[str, float | None]], seconds: Sequence[float]) -> dict[str, Any]:
    """The mean of each metric over the rows where it applies (None: no row applies), the
    number of rows as "n", and the median and 95th percentile of the answers' seconds."""
    means: dict[str, Any] = {}
    for metric in ANSWER_METRICS:
        values = [row[metric] for row in rows if row.get(metric) is not None]
        means[metric] = sum(values) / len(values) if values else None  # type: ignore[arg-type]
    means["n"] = len(rows)
    means["p50_s"] = round(statistics.median(seconds), 2) if seconds else None
    means["p95_s"] = round(percentile(seconds, 95), 2) if seconds else None
    return means


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile, interpolated between the two nearest ranks."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def answer_summary(
    questions: Sequence[Question], rows: Sequence[dict[str, float | None]], seconds: Sequence[float]
) -> dict[str, Any]:
    """The means overall, per language and per question type (those that occur)."""
    return by_slice(
        questions, lambda picked: mean_answer_scores([rows[i] for i in picked], [seconds[i] for i in picked])
    )

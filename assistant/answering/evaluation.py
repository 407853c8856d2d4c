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
    "evidence_keys",
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
    shown = " ".join(item["quote"] for item in answer.get("evidence", []))
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
        "evidence_keys": float(key_coverage(shown, question.keys) == 1.0) if question.keys else None,
    }


def mean_answer_scores(
    rows: Sequence[dict[str, float | None]], seconds: Sequence[float], evidence: Sequence[float | None] = ()
) -> dict[str, Any]:
    """The mean of each metric over the rows where it applies (None: no row applies), the
    number of rows as "n", the median and 95th percentile of the answers' seconds, and of
    the seconds to the first evidence (`evidence`: None where an answer showed none)."""
    means: dict[str, Any] = {}
    for metric in ANSWER_METRICS:
        values = [row[metric] for row in rows if row.get(metric) is not None]
        means[metric] = sum(values) / len(values) if values else None  # type: ignore[arg-type]
    means["n"] = len(rows)
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

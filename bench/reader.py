"""The evidence reader (assistant.answering.reader) alone, on an evaluation's questions: for
each question, the passages an answer would get (the direct search, or for a follow-up the
earlier question and this one together, as the evidence mode searches), the reader's
candidates, and whether the evidence answer (answering.modes.evidence_text) holds every
answer key. No chat model: a minute, not the half hour an answer run takes, so the reader's
weights can be calibrated here (policy.READER_WEIGHTS) and a grid of them compared.

    .venv/bin/python bench/reader.py eval/questions.jsonl --collection <id> [--grid] [--out reader]

Prints, per question type: the share of answerable questions whose evidence answer holds
every key (and the first hit's whole text, and the first three hits', for reference), the
share of unanswerable questions the model-free gates decline and of answerable ones they
decline wrongly (anchors, unknown names, unmentioned words, relevance: as a direct answer
decides; a multi-step answer reads each step apart), the reader's seconds (p50, p95), and
the best score of answerable and unanswerable questions that pass the anchor check (what
policy.READER_ANSWER_MIN separates). --grid also tries
every combination of weights around the policy's and prints the best ten. Writes
bench/results/<out>.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("MEM0_TELEMETRY", "False")

import django  # noqa: E402

django.setup()

from assistant.answering import cells, evidence, modes, policy, reader, router  # noqa: E402
from assistant.answering.evaluation import key_coverage, percentile  # noqa: E402
from assistant.answering.types import Turn  # noqa: E402
from assistant.management.commands.evaluate import default_user  # noqa: E402
from assistant.retrieval.evaluation import load_questions  # noqa: E402
from assistant.retrieval.fusion import media_intent  # noqa: E402
from assistant.retrieval.scope import scope_for  # noqa: E402
from common.language import language_of  # noqa: E402
from knowledge.models import Collection  # noqa: E402

GRID = {
    "anchors": (1.0, 2.0),
    "overlap": (0.5, 1.0, 2.0),
    "context": (0.0, 0.3),
    "rank": (0.2, 0.4, 0.8),
    "similarity": (0.0, 1.0, 2.0),
    "adds": (0.0, 0.3, 0.6),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("questions", type=Path)
    parser.add_argument("--collection", type=int, required=True)
    parser.add_argument("--grid", action="store_true")
    parser.add_argument("--out", default="reader")
    parser.add_argument("--second", type=float, help="policy.READER_SECOND_SHARE for this run.")
    parser.add_argument("--embed", type=int, help="Candidates the embedder rescores (policy.READER_EMBED).")
    parser.add_argument(
        "--weight", action="append", default=[], metavar="NAME=VALUE", help="A reader weight for this run."
    )
    parser.add_argument(
        "--rerank", type=int, default=0, help="With --confirm: also judge each of the best N windows alone."
    )
    parser.add_argument(
        "--confirm",
        action="store_true",
        help="Also ask the local chat model whether the quotes answer (answering.modes.confirm_messages) "
        "where the model-free gates let the evidence answer stand, and print each threshold's abstention.",
    )
    args = parser.parse_args()
    collection = Collection.objects.get(pk=args.collection)
    user = default_user(collection)
    scope = scope_for(user, [collection.pk])
    questions = load_questions(args.questions)
    if args.second is not None:
        policy.READER_SECOND_SHARE = args.second
    if args.embed is not None:
        policy.READER_EMBED = args.embed
    for setting in args.weight:
        name, _, value = setting.partition("=")
        if name not in policy.READER_WEIGHTS:
            parser.error(f"--weight {setting}: no reader weight {name!r} (known: {', '.join(policy.READER_WEIGHTS)})")
        policy.READER_WEIGHTS[name] = float(value)
    cases = []
    for question in questions:
        history = tuple(
            Turn(content, "") for role, content in question.history if role == "user"
        )  # only the earlier questions matter to the search
        query = router.with_topic(question.question, history) if history else question.question
        _results, sources, cell = cells.search_with_cell(user, query, scope, media=media_intent(question.question))
        lacking = evidence.unsupported(question.question, sources) if sources else []
        sources, lacking, nearby = evidence.checked(question.question, sources, scope, lacking)
        if nearby is not None and nearby.hit.kind == "table":  # as answering.strategies.Direct reads it
            cell = cells.read(question.question, sources)
        cases.append((question, query, sources, cell, lacking))
    cache: dict[str, list[float]] = {}
    judge = modes.registry.chat_model() if args.confirm else None

    def similarity(query: str, texts: Sequence[str]) -> list[float]:
        missing = [text for text in [f"q:{query}", *texts] if text not in cache and not text.startswith("q:")]
        key = f"q:{query}"
        if key not in cache:
            cache[key] = modes.registry.text_embedder().embed_query(query)
        if missing:
            for text, vector in zip(missing, modes.registry.text_embedder().embed_documents(missing), strict=True):
                cache[text] = vector
        wanted = cache[key]
        return [_cosine(wanted, cache[text]) for text in texts]

    def run(weights: dict[str, float], timed: bool = False) -> dict[str, Any]:
        rows = []
        if True:
            saved = dict(policy.READER_WEIGHTS)
            policy.READER_WEIGHTS.update(weights)
            try:
                for question, query, sources, cell, lacking in cases:
                    started = time.perf_counter()
                    reading = reader.read(query, sources, similarity=modes.similarity if timed else similarity)
                    reading = replace(reading, unknown=tuple(modes.unknown(scope, query, reading)))
                    seconds = time.perf_counter() - started
                    why = "near_miss" if lacking else (modes.unanswered(reading) if cell is None else None)
                    language = language_of(question.question)
                    confirmed: dict[str, Any] = {}
                    if (
                        judge is not None
                        and timed
                        and why is None
                        and cell is None
                        and reading.best is not None
                        and modes.confirmable(query)
                    ):
                        began = time.perf_counter()
                        messages = modes.confirm_messages(language, query, reading.quotes())
                        confirmed = {
                            "confirm": round(float(judge.yes_minus_no(messages)), 4),  # type: ignore[attr-defined]
                            "confirm_s": round(time.perf_counter() - began, 3),
                            "confirm_read": int(getattr(judge, "last_read", 0)),
                        }
                        if args.rerank:
                            began = time.perf_counter()
                            windows: list[reader.Candidate] = []
                            for candidate in reading.candidates:
                                if candidate.window not in {taken.window for taken in windows}:
                                    windows.append(candidate)
                                if len(windows) == args.rerank:
                                    break
                            scores = [
                                float(judge.yes_minus_no(modes.confirm_messages(language, query, [candidate])))  # type: ignore[attr-defined]
                                for candidate in windows
                            ]
                            top = max(range(len(windows)), key=lambda i: scores[i])
                            judged_text = modes.evidence_text(language, query, [windows[top]])[0]
                            confirmed |= {
                                "rerank": round(scores[top], 4),
                                "rerank_pick": top + 1,
                                "rerank_s": round(time.perf_counter() - began, 3),
                                "rerank_keys": float(key_coverage(judged_text, question.keys) == 1.0)
                                if question.keys
                                else None,
                                "single_keys": float(
                                    key_coverage(modes.evidence_text(language, query, windows[:1])[0], question.keys)
                                    == 1.0
                                )
                                if question.keys
                                else None,
                            }
                    if cell is not None:
                        text = cell.sentence
                    else:
                        text = modes.evidence_text(language, query, reading.quotes())[0] if reading.best else ""
                    rows.append(
                        {
                            "id": question.id,
                            "type": question.type,
                            "lang": question.lang,
                            "answerable": question.answerable,
                            "near_miss": bool(lacking),
                            "cell": cell is not None,
                            "best": round(reading.best.score, 3) if reading.best else None,
                            "relevance": reading.relevance,
                            "keys_all": float(key_coverage(text, question.keys) == 1.0) if question.keys else None,
                            "first_hit": float(key_coverage(sources[0].hit.text, question.keys) == 1.0)
                            if question.keys and sources
                            else None,
                            "first_three": float(
                                key_coverage(" ".join(s.hit.text for s in sources[:3]), question.keys) == 1.0
                            )
                            if question.keys and sources
                            else None,
                            "seconds": round(seconds, 4),
                            "absent": reading.absent,
                            "absent_terms": list(reading.unmentioned),
                            "unknown": list(reading.unknown),
                            "declined": why,
                            "similarity": reading.best.figures.get("similarity") if reading.best else None,
                            "adds": reading.best.figures.get("adds") if reading.best else None,
                            "overlap": reading.best.figures.get("overlap") if reading.best else None,
                            "evidence": text[:400],
                            **confirmed,
                        }
                    )
            finally:
                policy.READER_WEIGHTS.clear()
                policy.READER_WEIGHTS.update(saved)
        return {"weights": weights, "rows": rows, "summary": summary(rows)}

    measured = run(dict(policy.READER_WEIGHTS), timed=True)
    print_summary(measured["summary"])
    if judge is not None:
        measured["confirm"] = print_confirm(measured["rows"])
    out: dict[str, Any] = {"policy": measured}
    if args.grid:
        names = list(GRID)
        tried = []
        for values in itertools.product(*(GRID[name] for name in names)):
            weights = dict(zip(names, values, strict=True))
            result = run(weights)
            tried.append((result["summary"]["all"]["keys_all"], weights))
        tried.sort(key=lambda item: -item[0])
        print("\nbest weights (share of answerable questions whose evidence holds every key):")
        for share, weights in tried[:10]:
            print(f"  {share:.3f}  {weights}")
        out["grid"] = [{"keys_all": share, "weights": weights} for share, weights in tried]
    target = ROOT / "bench" / "results" / f"{args.out}.json"
    target.write_text(json.dumps(out, ensure_ascii=False, indent=1))
    print(f"\nwrote {target.relative_to(ROOT)}")


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / ((sum(x * x for x in a) ** 0.5) * (sum(y * y for y in b) ** 0.5) or 1.0)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups["all"].append(row)
        groups[row["type"]].append(row)
        groups[row["lang"]].append(row)
    out = {}
    for name, members in groups.items():
        scored = [row for row in members if row["keys_all"] is not None]
        seconds = [row["seconds"] for row in members]
        out[name] = {
            "n": len(members),
            "keys_all": _mean(row["keys_all"] for row in scored),
            "first_hit": _mean(row["first_hit"] for row in scored if row["first_hit"] is not None),
            "first_three": _mean(row["first_three"] for row in scored if row["first_three"] is not None),
            "correct_abstention": _mean(bool(row["declined"]) for row in members if not row["answerable"]),
            "false_abstention": _mean(bool(row["declined"]) for row in members if row["answerable"]),
            "p50_s": round(statistics.median(seconds), 3) if seconds else None,
            "p95_s": round(percentile(seconds, 95), 3) if seconds else None,
        }
    passing = [row for row in rows if not row["near_miss"] and row["best"] is not None and not row["cell"]]
    out["best_scores"] = {
        "answerable": sorted(row["relevance"] for row in passing if row["answerable"]),
        "unanswerable": sorted(row["relevance"] for row in passing if not row["answerable"]),
    }
    return out


def print_confirm(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each threshold of the short judge: the abstention if the evidence answers it judges
    below the threshold were declined too, and the keys those declines would cost."""
    judged = [row for row in rows if "confirm" in row]
    print(f"\nthe short judge on {len(judged)} evidence answers:")
    for answerable in (True, False):
        print(
            "  answerable" if answerable else "  unanswerable",
            sorted(row["confirm"] for row in judged if row["answerable"] == answerable),
        )
    seconds = [row["confirm_s"] for row in judged]
    read = [row["confirm_read"] for row in judged]
    if seconds:
        print(
            f"  seconds p50 {statistics.median(seconds):.2f} p95 {percentile(seconds, 95):.2f}, tokens read p50 "
            f"{statistics.median(read):.0f} max {max(read)}"
        )
    table = []
    print(f"  {'below':>6} {'abst. ok':>9} {'abst. no':>9} {'keys lost':>9}  by language ok/no")
    for step in range(-10, 11, 1):
        threshold = step / 10
        pairs = [(bool(row["declined"]) or row.get("confirm", 1.0) < threshold, row) for row in rows]
        ok = _mean(d for d, row in pairs if not row["answerable"])
        no = _mean(d for d, row in pairs if row["answerable"])
        lost = sum(1 for d, row in pairs if d and not row["declined"] and row["keys_all"])
        by = {
            lang: (
                _mean(d for d, row in pairs if not row["answerable"] and row["lang"] == lang),
                _mean(d for d, row in pairs if row["answerable"] and row["lang"] == lang),
            )
            for lang in ("en", "zh")
        }
        table.append({"below": threshold, "correct": ok, "false": no, "keys_lost": lost, "by_language": by})
        print(f"  {threshold:>6.1f} {_shown(ok)} {_shown(no)} {lost:>9}  {by}")
    return table


def _mean(values: Any) -> float | None:
    values = list(values)
    return round(sum(values) / len(values), 3) if values else None


def _shown(value: float | None) -> str:
    return f"{'—':>9}" if value is None else f"{value:>9.3f}"


def print_summary(result: dict[str, Any]) -> None:
    print(
        f"{'slice':14} {'n':>4} {'evidence':>9} {'1st hit':>8} {'1st 3':>6} {'abst. ok':>9} {'abst. no':>9} "
        f"{'p50 s':>6} {'p95 s':>6}"
    )
    for name, row in result.items():
        if name == "best_scores":
            continue
        print(
            f"{name:14} {row['n']:>4} {row['keys_all'] or 0:>9.3f} {row['first_hit'] or 0:>8.3f} "
            f"{row['first_three'] or 0:>6.3f} {_shown(row['correct_abstention'])} {_shown(row['false_abstention'])} "
            f"{row['p50_s'] or 0:>6.3f} {row['p95_s'] or 0:>6.3f}"
        )
    scores = result["best_scores"]
    print("relevance of the best, answerable past the anchor check:", scores["answerable"])
    print("relevance of the best, unanswerable past the anchor check:", scores["unanswerable"])


if __name__ == "__main__":
    main()

"""What the answer's model-free gates decide on the public evaluation, without the chat model:
the router's rules (which questions go to the planner, which are rewritten) and the evidence
check (which questions the portal declines before the model writes). Prints a table and
writes bench/results/gates.json.

    .venv/bin/python bench/gates.py --collection <id of the ingested eval/files> --user <email>

The passages checked are those the direct strategy gives the model (the question searched as
asked, PORTAL_ANSWER_SOURCES of them); a follow-up is searched with its earlier question, as
a rewrite that kept the topic would be. "Gold given": a declined answerable question whose
gold page was among the passages (the model could have answered it); the others were
declined on passages that do not hold the answer. No model but the embedder runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from assistant.answering import answer as answers  # noqa: E402
from assistant.answering import evidence, router  # noqa: E402
from assistant.answering.types import Turn  # noqa: E402
from assistant.management.commands.evaluate import find_user  # noqa: E402
from assistant.retrieval.evaluation import load_questions  # noqa: E402
from assistant.retrieval.search import search  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=Path, default=ROOT / "eval" / "questions.jsonl")
    parser.add_argument("--collection", type=int, required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gates.json")
    args = parser.parse_args()
    user = find_user(args.user)
    routes: dict[str, Counter[str]] = defaultdict(Counter)
    declined: dict[str, list[str]] = defaultdict(list)
    lost: dict[str, list[str]] = defaultdict(list)  # declined although the gold page was given
    rows = []
    for question in load_questions(args.questions):
        history = tuple(
            Turn(question.history[i][1], question.history[i + 1][1]) for i in range(0, len(question.history) - 1, 2)
        )
        strategy = router.by_rules(question.question, history).strategy
        routes[question.type][strategy] += 1
        query = router.with_topic(question.question, history) if history else question.question
        hits = search(user, query, collection_ids=[args.collection], k=settings.ANSWER_SOURCES).hits
        lacking = evidence.unsupported(question.question, answers.sources_of(hits))
        if lacking:
            declined[question.type].append(question.id)
        found = any((hit.document_name, hit.page_number) in question.gold for hit in hits[: settings.ANSWER_SOURCES])
        if lacking and found:
            lost[question.type].append(question.id)
        rows.append(
            {"id": question.id, "type": question.type, "strategy": strategy, "lacking": lacking, "gold_given": found}
        )
    print(f"{'type':<14}{'n':>4}  {'declined':>9}  {'of them, gold given':>20}  routes")
    for kind, counter in routes.items():
        n = sum(counter.values())
        print(f"{kind:<14}{n:>4}  {len(declined[kind]):>9}  {len(lost[kind]):>20}  {dict(counter)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {"routes": routes, "declined": declined, "declined_with_gold": lost, "per_question": rows}
    args.out.write_text(json.dumps(report, indent=2))
    print(f"Wrote {args.out}")


if __name__ == "__main__":
    main()

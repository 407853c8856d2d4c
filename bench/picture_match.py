"""Calibrates the picture match (assistant.retrieval.pictures): for every question of the
public evaluation that asks to see something (fusion.media_intent), the best pictures of the
picture channel with their match under several weights for the question's terms that no
picture holds, and whether each is a gold page. Then, for each weight and threshold, how many
questions would get a gold picture first (promoted) and how many a wrong one.

    .venv/bin/python bench/picture_match.py --collection <id of the ingested eval/files> --user <email>

Prints the table and writes bench/results/picture_match.json. Nothing but SQL and the query
embedding runs: no chat model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django  # noqa: E402

django.setup()

from assistant.management.commands.evaluate import find_user  # noqa: E402
from assistant.retrieval.evaluation import load_questions  # noqa: E402
from assistant.retrieval.fusion import media_intent  # noqa: E402
from assistant.retrieval.lexical import query_terms  # noqa: E402
from assistant.retrieval.pictures import coverage, held_terms, weights, with_forms  # noqa: E402
from assistant.retrieval.scope import scope_for  # noqa: E402
from knowledge.models import Chunk  # noqa: E402

ABSENT = (0.0, 0.1, 0.25, 0.5, 1.0)
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
TOP = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collection", type=int, required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--questions", type=Path, default=ROOT / "eval" / "questions.jsonl")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "picture_match.json")
    args = parser.parse_args()
    scope = scope_for(find_user(args.user), [args.collection])
    rows = []
    for question in load_questions(args.questions):
        if not media_intent(question.question):
            continue
        wanted = query_terms(question.question)
        found, counts, total = held_terms(scope, with_forms(wanted), TOP)
        chunks = Chunk.objects.select_related("document", "page").in_bulk([pk for pk, _held in found])
        pictures = []
        for pk, held in found:
            chunk = chunks[pk]
            pictures.append(
                {
                    "file": chunk.document.name,
                    "page": chunk.page.number,
                    "gold": (chunk.document.name, chunk.page.number) in question.gold,
                    "held": held,
                    "match": {str(a): round(coverage(held, weights(wanted, counts, total, a)), 3) for a in ABSENT},
                }
            )
        rows.append({"id": question.id, "type": question.type, "lang": question.lang, "pictures": pictures})
    table = summary(rows)
    for line in table["lines"]:
        print(line)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"questions": rows, "summary": table["grid"]}, ensure_ascii=False, indent=2))
    print(f"Wrote {args.out}")


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per absent weight and threshold: questions whose first promoted picture is gold (right),
    is not (wrong), and questions with a gold picture that nothing promoted (missed)."""
    wanting = sum(1 for row in rows if any(p["gold"] for p in row["pictures"]) or row["type"] == "picture")
    lines = [f"{len(rows)} questions ask to see something; {wanting} are picture questions or have a gold picture."]
    lines.append("absent  threshold  right  wrong  missed")
    grid = []
    for absent in ABSENT:
        for threshold in THRESHOLDS:
            right = wrong = missed = 0
            for row in rows:
                sure = [p for p in row["pictures"] if p["match"][str(absent)] >= threshold]
                sure.sort(key=lambda p: -p["match"][str(absent)])
                if sure and sure[0]["gold"]:
                    right += 1
                elif sure:
                    wrong += 1
                elif any(p["gold"] for p in row["pictures"]):
                    missed += 1
            grid.append({"absent": absent, "threshold": threshold, "right": right, "wrong": wrong, "missed": missed})
            lines.append(f"{absent:6}  {threshold:9}  {right:5}  {wrong:5}  {missed:6}")
    return {"lines": lines, "grid": grid}


if __name__ == "__main__":
    main()

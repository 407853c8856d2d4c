"""The table-cell reader (assistant.answering.cells) alone, on an evaluation's questions: for
each question, the passages an answer would get (answering.cells.search_with_cell), and
whether the reader answers from them, with what, and whether that holds an answer key.
No chat model: seconds, not the hour an answer run takes. Writes bench/results/<out>.json.

    .venv/bin/python bench/table_cells.py questions.jsonl --collection <id> [--out table-cells]

A question the reader answers skips the model; one it leaves takes the model's path
unchanged. So its firings are the whole of its effect: right ones on table questions,
and any on other questions, which must be none on unanswerable ones.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("MEM0_TELEMETRY", "False")

import django  # noqa: E402

django.setup()

from assistant.answering import cells, evidence  # noqa: E402
from assistant.answering.evaluation import key_coverage  # noqa: E402
from assistant.management.commands.evaluate import default_user  # noqa: E402
from assistant.retrieval.scope import scope_for  # noqa: E402
from knowledge.models import Collection  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("questions", type=Path)
    parser.add_argument("--collection", type=int, required=True)
    parser.add_argument("--out", default="table-cells")
    args = parser.parse_args()
    collection = Collection.objects.get(pk=args.collection)
    user = default_user(collection)
    scope = scope_for(user, [collection.pk])
    rows: list[dict[str, Any]] = []
    for line in args.questions.read_text().splitlines():
        question = json.loads(line)
        results, sources, cell = cells.search_with_cell(user, question["question"], scope)  # as answers search
        lacking = evidence.unsupported(question["question"], sources) if sources else []
        if cell is not None and lacking:
            cell = None
        keys = [tuple(key) if isinstance(key, list) else (key,) for key in question.get("keys") or []]
        row = {
            "id": question["id"],
            "type": question["type"],
            "lang": question["lang"],
            "fired": cell is not None,
            "value": cell.value if cell else None,
            "cell": f"{cell.row} | {cell.column}" if cell else None,
            "right": bool(cell and keys and key_coverage(cell.value, keys) == 1.0),
            "brought": bool(cell and cell.source.hit not in results.hits),
            "table_passages": sum(1 for source in sources if source.hit.kind == "table"),
        }
        rows.append(row)
        mark = ("right" if row["right"] else "WRONG") if cell else "-"
        brought = "later" if row["brought"] else ""
        print(f"{row['id']:<18} {mark:<6} {brought:<6} {row['value'] or ''!s:<12} {row['cell'] or ''}"[:200])
    by_type: dict[str, Counter[str]] = {}
    for row in rows:
        counts = by_type.setdefault(row["type"], Counter())
        counts["n"] += 1
        counts["fired"] += row["fired"]
        counts["right"] += row["right"]
    summary = {kind: dict(counts) for kind, counts in sorted(by_type.items())}
    print(json.dumps(summary, indent=1))
    out = ROOT / "bench" / "results" / f"{args.out}.json"
    out.write_text(json.dumps({"collection": collection.pk, "summary": summary, "questions": rows}, indent=1))
    print(f"written: {out}")


if __name__ == "__main__":
    main()

"""Table extraction strategies compared on hand-checked cells of real tables: prints cell and
header-path accuracy and seconds per page for each, writes bench/results/tables.json and
bench/results/tables.png.

    .venv/bin/python bench/tables.py            # about a minute on 2 cores
    .venv/bin/python bench/tables.py --keys <questions.jsonl> --collection <id> --out <file.json>

--keys: for each question, whether its answer keys appear in the text of the top 5 chunks that
retrieval (fused channels, no rerank) returns from the collection, searched as its owner;
needs the database (DATABASE_URL) and the embedder. It imports nothing of ingestion.tables, so
that it runs on a checkout from before tables were read cell by cell too.

The gold cells are in bench/tables-gold.json (files from eval/files/). A strategy gets credit
for a gold row's cells it returns whole and in order in one row (cell accuracy), and for a
gold value whose row header and column path name it as the gold says, read from its grid by
the same sentence builder the index uses (path accuracy: what a row sentence would say).
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GOLD = ROOT / "bench" / "tables-gold.json"
EVAL_FILES = ROOT / "eval" / "files"
RESULTS = ROOT / "bench" / "results"
Tables = list[tuple[list[list[str]], int | None]]  # each table's rows and header depth (None: inferred)


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text).replace("−", "-")).strip()


# -- strategies --------------------------------------------------------------------------------


def _extracted(found: Any) -> Tables:
    return [([[cell or "" for cell in row] for row in t.extract()], None) for t in (found.tables if found else [])]


def lines_with_layout(page: Any) -> Tables:
    """PyMuPDF's find_tables() as the portal called it: ruling lines, gated by the layout model."""
    return _extracted(page.find_tables())


def lines_only(page: Any) -> Tables:
    return _extracted(page.find_tables(use_layout=False))


def text_edges(page: Any) -> Tables:
    return _extracted(page.find_tables(use_layout=False, strategy="text"))


def union(page: Any) -> Tables:
    return _extracted(page.find_tables(union=True))


def refine(page: Any) -> Tables:
    return _extracted(page.find_tables(refine=True))


def llm_markdown(page: Any) -> Tables:
    """pymupdf4llm's Markdown of the page, its tables read back cell by cell."""
    import pymupdf4llm

    text = pymupdf4llm.to_markdown(page.parent, pages=[page.number], use_ocr=False, show_progress=False)
    found: Tables = []
    current: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            cells = [re.sub(r"<br\s*/?>", " ", c).replace("**", "").strip() for c in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells if c):
                current.append(cells)
        elif current:
            found.append((current, None))
            current = []
    return found


def words_in_boxes(page: Any) -> Tables:
    """The portal's grid from words (ingestion.tables) inside find_tables()'s table boxes."""
    from ingestion.parsers.pdf import table_grid

    found: Tables = []
    for table in page.find_tables().tables:
        grid = table_grid(page, table)
        if grid is not None:
            found.append(([list(row) for row in grid.rows], grid.header_rows))
    return found


STRATEGIES: dict[str, Callable[[Any], Tables]] = {
    "find_tables (lines + layout)": lines_with_layout,
    "find_tables use_layout=False": lines_only,
    "find_tables strategy=text": text_edges,
    "find_tables union=True": union,
    "find_tables refine=True": refine,
    "pymupdf4llm Markdown": llm_markdown,
    "words by cell box (portal)": words_in_boxes,
}


# -- scoring -----------------------------------------------------------------------------------


def _lcs(a: list[str], b: list[str]) -> int:
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


def row_credit(gold: list[str], found: Tables) -> int:
    want = [norm(cell) for cell in gold]
    return max((_lcs(want, [norm(c) for c in row if norm(c)]) for rows, _depth in found for row in rows), default=0)


def path_found(cell: dict[str, Any], found: Tables) -> bool:
    from ingestion import tables

    for rows, depth in found:
        for row in tables.table_rows(rows, depth):
            if not all(norm(part) in norm(row.label) for part in cell["row"]):
                continue
            for path, value in row.values:
                if norm(value) == norm(cell["value"]) and all(norm(part) in norm(path) for part in cell["column"]):
                    return True
    return False


def run() -> dict[str, Any]:
    import pymupdf

    gold = json.loads(GOLD.read_text(encoding="utf-8"))["tables"]
    report: dict[str, Any] = {"tables": len(gold), "strategies": {}}
    for name, strategy in STRATEGIES.items():
        cells = credit = paths = path_total = 0
        seconds: list[float] = []
        per_table = []
        for entry in gold:
            with pymupdf.open(EVAL_FILES / entry["file"]) as document:
                page = document[entry["page"] - 1]
                started = time.perf_counter()
                found = strategy(page)
                seconds.append(time.perf_counter() - started)
            got = sum(row_credit(row, found) for row in entry["rows"])
            total = sum(len(row) for row in entry["rows"])
            hits = sum(path_found(cell, found) for cell in entry["cells"])
            cells, credit = cells + total, credit + got
            paths, path_total = paths + hits, path_total + len(entry["cells"])
            per_table.append(
                {
                    "file": entry["file"],
                    "page": entry["page"],
                    "cells": f"{got}/{total}",
                    "paths": f"{hits}/{len(entry['cells'])}",
                }
            )
        report["strategies"][name] = {
            "cell_accuracy": round(credit / cells, 3),
            "path_accuracy": round(paths / path_total, 3),
            "cells": cells,
            "paths": path_total,
            "median_s_per_page": round(statistics.median(seconds), 3),
            "per_table": per_table,
        }
        print(
            f"{name:32s} cells {credit:3d}/{cells} = {credit / cells:.2f}   paths {paths:2d}/{path_total} = "
            f"{paths / path_total:.2f}   {statistics.median(seconds):.2f} s/page (median)"
        )
    return report


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["strategies"])
    figure, axis = plt.subplots(figsize=(8, 3.6))
    ys = range(len(names))
    axis.barh([y + 0.2 for y in ys], [report["strategies"][n]["cell_accuracy"] for n in names], 0.4, label="cells")
    axis.barh([y - 0.2 for y in ys], [report["strategies"][n]["path_accuracy"] for n in names], 0.4, label="paths")
    axis.set_yticks(list(ys), names, fontsize=8)
    axis.set_xlim(0, 1)
    axis.set_title(f"Table strategies on {report['tables']} real tables (bench/tables-gold.json)", fontsize=9)
    axis.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def keys_in_top(questions: Path, collection: int, k: int = 5) -> dict[str, Any]:
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    django.setup()
    from django.contrib.auth import get_user_model

    from assistant.answering.evaluation import holds
    from assistant.answering.values import normalise
    from assistant.retrieval.search import search
    from knowledge.models import Collection

    # A team's collection has no owning user: search as the first superuser, as evaluate does.
    owner = Collection.objects.get(pk=collection).owner_user
    owner = owner or get_user_model().objects.filter(is_superuser=True).order_by("pk").first()
    if owner is None:
        raise SystemExit(f"Collection {collection} has no owner and there is no superuser to search as.")
    found: dict[str, Any] = {}
    for line in questions.read_text(encoding="utf-8").splitlines():
        question = json.loads(line)
        hits = search(owner, question["question"], collection_ids=[collection], k=k, rerank=False).hits[:k]
        text = normalise("\n".join(hit.text for hit in hits))
        keys = [tuple(key) if isinstance(key, list) else (key,) for key in question["keys"]]
        found[question["id"]] = all(holds(text, key) for key in keys)
    held = sum(found.values())
    print(f"answer keys in the top {k} chunks: {held}/{len(found)} questions")
    return {"k": k, "held": held, "questions": len(found), "per_question": found}


def main() -> None:
    if "--keys" in sys.argv:
        args = dict(zip(sys.argv[1::2], sys.argv[2::2], strict=False))
        report = keys_in_top(Path(args["--keys"]), int(args["--collection"]))
        Path(args["--out"]).write_text(json.dumps(report, indent=2), encoding="utf-8")
        return
    report = run()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "tables.json").write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    try:
        plot(report, RESULTS / "tables.png")
    except ImportError:  # Matplotlib is a dev dependency: the figures stand without the chart
        print("Matplotlib is not installed: no chart")
    print(f"Wrote {RESULTS / 'tables.json'}")


if __name__ == "__main__":
    main()

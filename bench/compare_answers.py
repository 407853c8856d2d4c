"""Two runs of `manage.py evaluate --answers` side by side, as Markdown tables: every answer
metric per language and question type, and per half (calibration, held-out; eval/README.md)
and per half and language or type, before → after, and what the portal's checks did in the
after run. A slice that the before run lacks (a run from before the halves) shows "—" there.

    .venv/bin/python bench/compare_answers.py before.json after.json

The JSON files are what `manage.py evaluate --answers --out <file>` wrote.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

LANGS = ("zh", "en")
TYPES = ("fact", "table", "picture", "multihop", "followup", "unanswerable")
HALVES = ("calibration", "held-out")
SLICES = (
    "all",
    *LANGS,
    *TYPES,
    *HALVES,
    *(f"{half}/{name}" for half in HALVES for name in (*LANGS, *TYPES)),
)
COLUMNS = (
    ("cite@1", "cite@1"),
    ("cite@5", "cite@5"),
    ("gold_recall", "gold recall"),
    ("key_coverage", "key coverage"),
    ("keys_all", "every key"),
    ("keys_200", "every key in 200 chars"),
    ("median_chars", "median chars"),
    ("midword_quotes", "quotes starting mid-word"),
    ("midword_quote_ends", "quotes ending mid-word"),
    ("abstain_correct", "correct abstention"),
    ("abstain_false", "false abstention"),
    ("attachment", "attachments"),
    ("p50_s", "p50 s"),
    ("p95_s", "p95 s"),
)


def load(path: Path) -> dict[str, Any]:
    report = json.loads(path.read_text(encoding="utf-8"))
    if "answers" not in report:
        raise SystemExit(f"{path} has no answers: run manage.py evaluate with --answers.")
    return report["answers"]


def summary_of(answers: dict[str, Any], name: str) -> dict[str, Any] | None:
    summary = answers["summary"]
    if name == "all":
        return summary["overall"]
    for key in ("by_lang", "by_type", "by_half", "by_half_lang", "by_half_type"):
        found: dict[str, Any] | None = summary.get(key, {}).get(name)
        if found:
            return found
    return None


def cell(before: Any, after: Any) -> str:
    if before is None and after is None:
        return "—"
    digits = 1 if max(abs(value) for value in (before, after) if value is not None) >= 10 else 2
    return " → ".join("—" if value is None else f"{value:.{digits}f}" for value in (before, after))


def checks(answers: dict[str, Any]) -> Counter[str]:
    """How many answers each check changed (the after run's `checks`)."""
    counted: Counter[str] = Counter()
    for row in answers["per_question"]:
        for name, value in (row.get("checks") or {}).items():
            counted[name] += bool(value)
        if (row.get("timings") or {}).get("retry") is not None and not (row.get("checks") or {}).get("retried"):
            counted["retried, refused again"] += 1
    return counted


def judged(answers: dict[str, Any]) -> list[str]:
    """What the judge (run with PORTAL_ANSWER_JUDGE=-1: scored, never declining) would have
    done at each threshold: the answers it declines are those scored below it that the
    portal answered. Declining an answerable question costs its key coverage."""
    rows = [row for row in answers["per_question"] if row.get("judge") is not None]
    if not rows:
        return []
    unanswerable = [row for row in answers["per_question"] if row["type"] == "unanswerable"]
    answerable = [row for row in answers["per_question"] if row["type"] != "unanswerable"]
    lines = [
        f"Judge scored {len(rows)} of {len(answers['per_question'])} answers. Declining below a threshold:",
        "",
        "| threshold | unanswerable refused | answerable refused | answered with a key, now declined |",
        "|---|---|---|---|",
    ]
    for tenth in range(-9, 10, 1):
        threshold = tenth / 10
        declined = [row for row in rows if not row["abstain"] and row["judge"] < threshold]
        right = sum(1 for row in unanswerable if row["abstain"] or row in declined)
        wrong = sum(1 for row in answerable if row["abstain"] or row in declined)
        lost = sum(
            1 for row in declined if row["type"] != "unanswerable" and (row["scores"].get("key_coverage") or 0) > 0
        )
        lines.append(f"| {threshold:+.1f} | {right} of {len(unanswerable)} | {wrong} of {len(answerable)} | {lost} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    before, after = load(args.before), load(args.after)
    header = "| slice | n | " + " | ".join(label for _key, label in COLUMNS) + " |"
    print(header)
    print("|" + "---|" * (len(COLUMNS) + 2))
    for name in SLICES:
        old, new = summary_of(before, name) or {}, summary_of(after, name)
        if not new:
            continue
        cells = [cell(old.get(key), new.get(key)) for key, _label in COLUMNS]
        print(f"| {name} | {new['n']} | " + " | ".join(cells) + " |")
    print()
    counted = checks(after)
    total = len(after["per_question"])
    print("Checks in the after run: " + ", ".join(f"{name} {count} of {total}" for name, count in counted.items()))
    changed = [
        (old["id"], old["scores"], new["scores"])
        for old, new in zip(before["per_question"], after["per_question"], strict=True)
        if old["scores"] != new["scores"]
    ]
    better = sum(1 for _id, old, new in changed if (new.get("key_coverage") or 0) > (old.get("key_coverage") or 0))
    worse = sum(1 for _id, old, new in changed if (new.get("key_coverage") or 0) < (old.get("key_coverage") or 0))
    print(f"Key coverage per question: {better} better, {worse} worse, of {total}.")
    calibration = judged(after)
    if calibration:
        print()
        print("\n".join(calibration))


if __name__ == "__main__":
    main()

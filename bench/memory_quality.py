"""What memory keeps, on the labelled set in tests/files/memory/ (issue 19), with the real chat
model: each turn is said by a new user (`remember`, as the memory task runs it), then the
user's memories are read back.

- precision: stored memories that are facts about the user (the turn is worth keeping and the
  memory holds one of its terms, and is not a question restated) over all stored memories;
- recall: turns worth keeping (statements, corrections, remembers) with a memory that holds
  all of the turn's terms; a forget said to a new user must store nothing;
- model calls and seconds per turn, for the turns kept and for those the gate refused;
- sequences (sequences.jsonl): one user says the turns in order; whether the end state holds.

    .venv/bin/python bench/memory_quality.py [--split holdout] [--out bench/results/memory-quality.json]

Needs DATABASE_URL, REDIS_URL and the local models; its users (`bench-memq-...`) are deleted at
the end. Runs on a checkout from before the gate too (`remember(user, question, answer)`: the
answer given is the one a document question got then, "the documents do not contain it").
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("MEM0_TELEMETRY", "False")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402

from assistant.memory.service import memories  # noqa: E402

FILES = ROOT / "tests" / "files" / "memory"
QUESTION = re.compile(r"^\s*(用户|user)\s*(询问|问|想知道|想了解|咨询|asks?|asked|is asking|wants to know)", re.I)
NO_ANSWER = {"zh": "文档中没有找到答案。", "en": "The documents do not contain the answer."}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("all", "dev", "holdout"), default="all")
    parser.add_argument("--limit", type=int, default=0, help="only the first N turns (0: all)")
    parser.add_argument("--no-sequences", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "memory-quality.json")
    args = parser.parse_args()
    turns = [json.loads(line) for line in (FILES / "turns.jsonl").read_text().splitlines() if line.strip()]
    turns = [turn for turn in turns if args.split in ("all", turn.get("split"))]
    turns = turns[: args.limit] if args.limit else turns
    store = memories()
    stamp = uuid.uuid4().hex[:8]
    users: list[Any] = []
    try:
        rows = [_turn(store, users, stamp, turn) for turn in turns]
        sequences = [] if args.no_sequences else _sequences(store, users, stamp)
    finally:
        for user in users:
            store.delete_all(user)
            user.delete()
    result = {"split": args.split, "summary": _summary(rows, sequences), "turns": rows, "sequences": sequences}
    args.out.write_text(json.dumps(result, ensure_ascii=False, indent=1))
    print(json.dumps(result["summary"], ensure_ascii=False, indent=1))
    print(f"written: {args.out}")


def _user(users: list[Any], stamp: str, name: str) -> Any:
    username = f"bench-memq-{stamp}-{name}"
    user = get_user_model().objects.create_user(username=username, email=f"{username}@example.com", password=None)
    users.append(user)
    return user


def _say(store: Any, user: Any, text: str, lang: str) -> None:
    if "answer" in inspect.signature(store.remember).parameters:  # before the gate
        store.remember(user, text, NO_ANSWER[lang])
    else:
        store.remember(user, text)


def _turn(store: Any, users: list[Any], stamp: str, turn: dict[str, Any]) -> dict[str, Any]:
    user = _user(users, stamp, turn["id"])
    started = time.perf_counter()
    _say(store, user, turn["text"], turn["lang"])
    seconds = time.perf_counter() - started
    stored = [item.text for item in store.all(user)]
    terms = [term.lower() for term in turn.get("terms", [])]
    wanted = turn["keep"] and turn["kind"] != "forget"
    right = [text for text in stored if wanted and _about(text, terms, any)]
    found = wanted and any(_about(text, terms, all) for text in stored)
    row = {"id": turn["id"], "lang": turn["lang"], "kind": turn["kind"], "keep": turn["keep"], "text": turn["text"]}
    print(f"{turn['id']:8} {seconds:6.1f} s  stored {len(stored)}  right {len(right)}  {stored}", flush=True)
    return {**row, "stored": stored, "right": len(right), "found": found, "wanted": wanted, "seconds": seconds}


def _about(text: str, terms: list[str], combine: Any) -> bool:
    return not QUESTION.match(text) and bool(terms) and combine(term in text.lower() for term in terms)


def _sequences(store: Any, users: list[Any], stamp: str) -> list[dict[str, Any]]:
    results = []
    for line in (FILES / "sequences.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        sequence = json.loads(line)
        user = _user(users, stamp, sequence["id"])
        for text in sequence["turns"]:
            _say(store, user, text, sequence["lang"])
        stored = [item.text for item in store.all(user)]
        failures = _end_failures(sequence["end"], stored)
        print(f"{sequence['id']:24} {'ok' if not failures else 'FAIL ' + '; '.join(failures)}  {stored}", flush=True)
        results.append({"id": sequence["id"], "lang": sequence["lang"], "stored": stored, "failures": failures})
    return results


def _end_failures(end: dict[str, Any], stored: list[str]) -> list[str]:
    lowered = [text.lower() for text in stored]
    failures = []
    for group in end.get("present", []):
        if not any(all(term.lower() in text for term in group) for text in lowered):
            failures.append(f"no memory holds {group}")
    for absent in end.get("absent", []):
        if isinstance(absent, str):
            absent = {"all": [absent]}
        for text in lowered:
            if all(term.lower() in text for term in absent["all"]) and not any(
                term.lower() in text for term in absent.get("unless", [])
            ):
                failures.append(f"a memory holds {absent['all']}: {text}")
    if "count" in end and len(stored) != end["count"]:
        failures.append(f"{len(stored)} memories, not {end['count']}")
    return failures


def _summary(rows: list[dict[str, Any]], sequences: list[dict[str, Any]]) -> dict[str, Any]:
    def figures(part: list[dict[str, Any]]) -> dict[str, Any]:
        stored = sum(len(row["stored"]) for row in part)
        wanted = [row for row in part if row["wanted"]]
        refused = [row["seconds"] for row in part if not row["keep"]]
        return {
            "turns": len(part),
            "stored": stored,
            "precision": round(sum(row["right"] for row in part) / stored, 3) if stored else None,
            "recall": round(sum(row["found"] for row in wanted) / len(wanted), 3) if wanted else None,
            "stored_for_nothing_to_keep": sum(len(row["stored"]) for row in part if not row["wanted"]),
            "seconds_per_turn_nothing_to_keep": round(sum(refused) / len(refused), 3) if refused else None,
        }

    return {
        "all": figures(rows),
        "zh": figures([row for row in rows if row["lang"] == "zh"]),
        "en": figures([row for row in rows if row["lang"] == "en"]),
        "sequences_passed": f"{sum(not s['failures'] for s in sequences)}/{len(sequences)}",
    }


if __name__ == "__main__":
    main()

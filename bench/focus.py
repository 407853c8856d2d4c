"""What cutting passages to the question (answering.passages.focus) costs and saves, without
the chat model: the answer prompt's size in the chat model's own tokens, and whether each
answer key is still in it, for the whole passages cut at PORTAL_ANSWER_CONTEXT_CHARS-style
budgets (the first characters of each passage, as before) and for focused passages.

    .venv/bin/python bench/focus.py --collection <id of the ingested eval/files> --user <email>

Prints medians and key retention per language, writes bench/results/focus.json. The passages
are those the direct strategy gives the model (a follow-up searched with its earlier question).
Only the tokenizer of the local chat model is loaded (llama.cpp, vocab only).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.test import override_settings  # noqa: E402

from assistant.answering import answer as answers  # noqa: E402
from assistant.answering import router  # noqa: E402
from assistant.answering.evaluation import key_coverage  # noqa: E402
from assistant.answering.types import Source, Turn  # noqa: E402
from assistant.management.commands.evaluate import find_user  # noqa: E402
from assistant.retrieval.evaluation import load_questions  # noqa: E402
from assistant.retrieval.search import search  # noqa: E402
from common.language import Language, language_of  # noqa: E402
from providers.local.model_files import QWEN_CHAT_1_5B, ensure_model  # noqa: E402


def first_chars(question: str, sources: tuple[Source, ...], language: Language, budget_chars: int) -> str:
    """The prompt as it was before focus: each passage's first characters."""
    share = max(budget_chars // max(len(sources), 1), 120)
    lines = [f"[{s.number}] {s.hit.document_name}: {' '.join(s.hit.text.split())[:share]}" for s in sources]
    system = answers.messages(question, (), language)[0].content
    return system + "\n" + "\n".join(lines) + f"\n{question}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=Path, default=ROOT / "eval" / "questions.jsonl")
    parser.add_argument("--collection", type=int, required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--budgets", default="600,900,1200", help="focus budgets in tokens to compare")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "focus.json")
    args = parser.parse_args()
    from llama_cpp import Llama

    tokenizer = Llama(model_path=str(ensure_model(QWEN_CHAT_1_5B, settings.MODELS_DIR)), vocab_only=True, verbose=False)

    def count(text: str) -> int:
        return len(tokenizer.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    user = find_user(args.user)
    budgets = [int(value) for value in args.budgets.split(",")]
    variants = ["first 3000 chars", *(f"focus {budget}" for budget in budgets)]
    rows: list[dict[str, Any]] = []
    for question in load_questions(args.questions):
        if not question.answerable or not question.keys:
            continue
        history = tuple(
            Turn(question.history[i][1], question.history[i + 1][1]) for i in range(0, len(question.history) - 1, 2)
        )
        query = router.with_topic(question.question, history) if history else question.question
        hits = search(user, query, collection_ids=[args.collection], k=settings.ANSWER_SOURCES).hits
        sources = answers.sources_of(hits)
        if not sources:
            continue
        language = language_of(question.question)
        prompts = {variants[0]: first_chars(query, sources, language, 3000)}
        for budget, name in zip(budgets, variants[1:], strict=True):
            with override_settings(ANSWER_CONTEXT_TOKENS=budget):
                prompts[name] = "\n".join(message.content for message in answers.messages(query, sources, language))
        gold_given = any((s.hit.document_name, s.hit.page_number) in question.gold for s in sources)
        rows.append(
            {
                "id": question.id,
                "lang": question.lang,
                "gold_given": gold_given,
                **{f"{name} tokens": count(text) for name, text in prompts.items()},
                **{f"{name} keys": key_coverage(text, question.keys) for name, text in prompts.items()},
            }
        )
    report: dict[str, dict[str, Any]] = {}
    print(f"{'slice':<6}{'n':>4}  " + "  ".join(f"{name:>22}" for name in variants))
    for lang in ("all", "zh", "en"):
        picked = [row for row in rows if lang in ("all", row["lang"])]
        given = [row for row in picked if row["gold_given"]]
        report[lang] = {"n": len(picked), "gold_given": len(given)}
        cells = []
        for name in variants:
            tokens = statistics.median(row[f"{name} tokens"] for row in picked)
            kept = sum(row[f"{name} keys"] for row in given) / max(len(given), 1)
            report[lang] |= {f"{name} median tokens": tokens, f"{name} key coverage (gold given)": round(kept, 3)}
            cells.append(f"{tokens:>7.0f} tok, keys {kept:.2f}")
        print(f"{lang:<6}{len(picked):>4}  " + "  ".join(f"{cell:>22}" for cell in cells))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": report, "per_question": rows}, indent=2, ensure_ascii=False))
    print(f"Wrote {args.out}")


if __name__ == "__main__":
    main()

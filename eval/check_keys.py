"""Checks the public evaluation set: its manifests, its files and its questions.

    .venv/bin/python eval/check_keys.py eval/questions.jsonl
    .venv/bin/python eval/check_keys.py --show manual.pdf:12      # a page's text as the portal reads it

Loads every manifest-*.jsonl beside this script, checks each listed file (eval/files/<lang>/<file>)
against its sha256, size and page count, reads the gold pages with the portal's own parsers (plus
the OCR the portal runs on pictures and pages without text), and checks that every key of every
answerable question occurs on at least one of its gold pages, and for multihop questions that each
gold page holds at least one key. Page texts are cached in /tmp/eval-pages-cache/ by sha256, so
reruns are fast. Prints a line per failing question and a summary; exits 1 on any failure.

A photo's page text is what the OCR reads in it, so a picture question's key that says what a
photo shows (its colour: "red", "红") cannot be on it: where every gold file of a picture question
is a photo (manifest kind "photo") and such a key is on none of their pages, the key was checked
by eye when the question was written, and it is counted in the summary instead of failing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

EVAL_DIR = Path(__file__).resolve().parent
REPO = EVAL_DIR.parent
sys.path.insert(0, str(REPO))

# How `manage.py evaluate --answers` compares keys with answers, so the same with pages.
from assistant.answering.evaluation import holds  # noqa: E402
from assistant.answering.values import normalise  # noqa: E402


def key_found(key: str | list[str], text: str) -> bool:
    """A key as the question file writes it (a string, or a list of spellings of which one
    is enough) occurs in normalised text: the answers' own check (`holds`)."""
    return holds(text, (key,) if isinstance(key, str) else tuple(key))


# Page texts by file sha256: derived data only, safe to share and to delete.
CACHE_DIR = Path(os.environ.get("EVAL_PAGES_CACHE", "/tmp/eval-pages-cache"))  # noqa: S108
CACHE_VERSION = 2
LANGS = ("en", "zh")
TYPES = ("fact", "table", "picture", "multihop", "followup", "unanswerable")
QUESTION_FIELDS = {"id", "question", "lang", "type", "gold", "keys", "history", "ci", "note"}
MANIFEST_FIELDS = {
    "file": str,
    "lang": str,
    "package": str,
    "version": str,
    "path_in_package": str,
    "licence": str,
    "sha256": str,
    "bytes": int,
    "pages": int,
    "kind": str,
    "ci": bool,
}
FileKey = tuple[str, str]  # (half, file name): manifest-<half>.jsonl lists the files in files/<half>/


class Problems:
    """What failed, by question or file, printed as it is found."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, where: str, message: str) -> None:
        line = f"FAIL {where}: {message}"
        self.lines.append(line)
        print(line, flush=True)


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()


def read_jsonl(path: Path, problems: Problems) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.add(f"{path.name}:{number}", f"not JSON ({exc})")
            continue
        if not isinstance(row, dict):
            problems.add(f"{path.name}:{number}", "not a JSON object")
            continue
        rows.append(row)
    return rows


def load_manifests(problems: Problems) -> dict[FileKey, dict[str, Any]]:
    manifest: dict[FileKey, dict[str, Any]] = {}
    for path in sorted(EVAL_DIR.glob("manifest-*.jsonl")):
        for entry in read_jsonl(path, problems):
            where = f"{path.name}:{entry.get('file')}"
            wrong = [
                name for name, kind in MANIFEST_FIELDS.items() if type(entry.get(name)) is not kind
            ]  # type(), not isinstance: True is no page count
            if wrong:
                problems.add(where, f"missing or mistyped fields: {', '.join(wrong)}")
                continue
            if entry["lang"] not in LANGS:
                problems.add(where, f"lang {entry['lang']!r} is not one of {LANGS}")
                continue
            half = path.stem.removeprefix("manifest-")
            key = (half, entry["file"])
            entry["_half"] = half  # the set the file belongs to; its "lang" is the document's language
            if key in manifest:
                problems.add(where, "listed twice")
            manifest[key] = entry
    return manifest


def file_path(entry: dict[str, Any]) -> Path:
    return EVAL_DIR / "files" / entry["_half"] / entry["file"]


def page_texts(path: Path, digest: str) -> list[str]:
    """The file's pages as the portal indexes them: the headings above the page (as the index
    prefixes them to its chunks), the parser's text, and the OCR text of pages without a text
    layer and of pictures the parser marks for reading (as ingestion.enrich does)."""
    cached = CACHE_DIR / f"{digest}.json"
    if cached.exists():
        data = json.loads(cached.read_text(encoding="utf-8"))
        if data.get("version") == CACHE_VERSION:
            return [str(text) for text in data["pages"]]
    from ingestion.parsers.formats import parser_for
    from ingestion.sniff import sniff

    texts = []
    for page in parser_for(sniff(path, path.name)).pages(path):
        parts = [" > ".join(page.heading_path)] if page.heading_path else []
        parts += [block.text for block in page.blocks if block.text]
        parts += [_ocr_text(block.image) for block in page.blocks if block.read_text and block.image is not None]
        if page.needs_ocr and page.render is not None:
            parts.append(_ocr_text(page.render))
        texts.append("\n\n".join(part for part in parts if part.strip()))
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps({"version": CACHE_VERSION, "pages": texts}, ensure_ascii=False), encoding="utf-8")
    return texts


def _ocr_text(image: bytes) -> str:
    from ingestion.enrich import MIN_CONFIDENCE
    from providers import registry

    result = registry.ocr().read(image)
    return "\n".join(line.text for line in result.lines if line.confidence >= MIN_CONFIDENCE and line.text.strip())


def check_files(
    manifest: dict[FileKey, dict[str, Any]], wanted: Iterable[FileKey], problems: Problems
) -> dict[FileKey, list[str]]:
    """Each wanted file's normalised page texts, after checking it against its manifest entry."""
    pages: dict[FileKey, list[str]] = {}
    for key in sorted(set(wanted)):
        entry = manifest[key]
        where = f"{key[0]}/{key[1]}"
        path = file_path(entry)
        if not path.is_file():
            problems.add(where, f"missing: {path}")
            continue
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest != entry["sha256"]:
            problems.add(where, f"sha256 is {digest}, the manifest says {entry['sha256']}")
        if len(data) != entry["bytes"]:
            problems.add(where, f"{len(data)} bytes, the manifest says {entry['bytes']}")
        started = time.monotonic()
        try:
            texts = page_texts(path, digest)
        except Exception as exc:  # a parser's ParseError or anything else: the file is unusable
            problems.add(where, f"cannot be parsed: {exc}")
            continue
        seconds = time.monotonic() - started
        if seconds > 1:
            print(f"parsed {where}: {len(texts)} pages in {seconds:.1f} s", flush=True)
        if len(texts) != entry["pages"]:
            problems.add(where, f"{len(texts)} pages, the manifest says {entry['pages']}")
        pages[key] = [normalise(text) for text in texts]
    return pages


def _is_key(key: object) -> bool:
    if isinstance(key, str):
        return bool(key.strip())
    return isinstance(key, list) and bool(key) and all(isinstance(item, str) and item.strip() for item in key)


def check_schema(question: dict[str, Any], manifest: dict[FileKey, dict[str, Any]], problems: Problems) -> bool:
    qid = str(question.get("id"))
    errors = []
    unknown = set(question) - QUESTION_FIELDS
    if unknown:
        errors.append(f"unknown fields {sorted(unknown)}")
    for name in ("id", "question"):
        if not isinstance(question.get(name), str) or not question[name].strip():
            errors.append(f"{name} must be a non-empty string")
    if question.get("lang") not in LANGS:
        errors.append(f"lang must be one of {LANGS}")
    kind = question.get("type")
    if kind not in TYPES:
        errors.append(f"type must be one of {TYPES}")
    if not isinstance(question.get("ci"), bool):
        errors.append("ci must be true or false")
    if "note" in question and not isinstance(question["note"], str):
        errors.append("note must be a string")
    gold, keys, history = question.get("gold"), question.get("keys"), question.get("history")
    if not isinstance(gold, list) or not all(
        isinstance(g, dict) and set(g) == {"file", "page"} and isinstance(g["file"], str) and type(g["page"]) is int
        for g in gold
    ):
        errors.append('gold must be a list of {"file": str, "page": int}')
        gold = []
    if not isinstance(keys, list) or not all(_is_key(k) for k in keys):
        errors.append("keys must be a list of non-empty strings or non-empty lists of them")
    if not isinstance(history, list) or not all(
        isinstance(turn, dict)
        and set(turn) == {"role", "content"}
        and turn["role"] in ("user", "assistant")
        and isinstance(turn["content"], str)
        and turn["content"].strip()
        for turn in history
    ):
        errors.append('history must be a list of {"role": "user"|"assistant", "content": str}')
    elif kind == "followup" and (not history or history[0]["role"] != "user" or history[-1]["role"] != "assistant"):
        errors.append("a followup's history must hold at least one user turn and the assistant's answer")
    elif kind != "followup" and history:
        errors.append("only followup questions have a history")
    if kind == "unanswerable":
        if gold or keys:
            errors.append("unanswerable questions have empty gold and keys")
        if not str(question.get("note", "")).strip():
            errors.append("unanswerable questions need a note naming the closest page")
    elif kind in TYPES:
        if not gold:
            errors.append("answerable questions need gold pages")
        if not keys and kind != "picture":
            errors.append("answerable questions need keys (only picture questions may have none)")
        if kind == "multihop" and len({(g["file"], g["page"]) for g in gold}) < 2:
            errors.append("multihop questions need at least two gold pages")
    for g in gold:
        entry = resolve(question, g["file"], manifest)
        if entry is None:
            errors.append(f"gold file {g['file']} is in no manifest")
        elif not 1 <= g["page"] <= entry["pages"]:
            errors.append(f"gold page {g['file']}:{g['page']} is outside 1..{entry['pages']}")
        elif question.get("ci") is True and not entry["ci"]:
            errors.append(f"a ci question uses {g['file']}, which is not a ci file")
    for error in errors:
        problems.add(qid, error)
    return not errors


def resolve(question: dict[str, Any], name: str, manifest: dict[FileKey, dict[str, Any]]) -> dict[str, Any] | None:
    """A gold file's manifest entry: the set of the question's language first, then any other."""
    own = manifest.get((str(question.get("lang")), name))
    if own is not None:
        return own
    return next((entry for (_half, file), entry in manifest.items() if file == name), None)


def check_keys(
    question: dict[str, Any],
    manifest: dict[FileKey, dict[str, Any]],
    pages: dict[FileKey, list[str]],
    problems: Problems,
) -> int:
    """Checks the question's keys on its gold pages; returns how many keys it left to the eye
    (a picture question's keys on photos, which hold no words for what they show)."""
    qid = question["id"]
    texts = []
    kinds = set()
    for g in question["gold"]:
        entry = resolve(question, g["file"], manifest)
        assert entry is not None  # check_schema said so
        parsed = pages.get((entry["_half"], entry["file"]))
        if parsed is None:
            problems.add(qid, f"gold file {g['file']} could not be read")
            return 0
        texts.append((f"{g['file']}:{g['page']}", parsed[g["page"] - 1]))
        kinds.add(entry["kind"])
    by_eye = 0
    for key in question["keys"]:
        if any(key_found(key, text) for _where, text in texts):
            continue
        if question["type"] == "picture" and kinds == {"photo"}:
            by_eye += 1
            continue
        problems.add(qid, f"key {key!r} is on none of the gold pages {[where for where, _text in texts]}")
    if question["type"] == "multihop":
        for where, text in texts:
            if not any(key_found(key, text) for key in question["keys"]):
                problems.add(qid, f"gold page {where} holds none of the keys")
    return by_eye


def show(spec: str, manifest: dict[FileKey, dict[str, Any]]) -> None:
    name, _sep, page = spec.rpartition(":")
    if not page.isdigit():
        name, page = spec, ""
    entries = [entry for (_half, file), entry in manifest.items() if file == name]
    if not entries:
        sys.exit(f"{name} is in no manifest")
    entry = entries[0]
    path = file_path(entry)
    texts = page_texts(path, hashlib.sha256(path.read_bytes()).hexdigest())
    numbers = [int(page)] if page else range(1, len(texts) + 1)
    for number in numbers:
        print(f"===== {name} page {number} of {len(texts)}")
        print(texts[number - 1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("questions", nargs="*", type=Path, help="questions-*.jsonl files")
    parser.add_argument("--show", metavar="FILE[:PAGE]", help="print a file's page texts (all pages without :PAGE)")
    parser.add_argument("--all-files", action="store_true", help="check every manifest file, not only gold files")
    args = parser.parse_args(argv)
    if not args.questions and not args.show:
        parser.error("name at least one questions file, or --show")
    setup_django()
    problems = Problems()
    manifest = load_manifests(problems)
    if args.show:
        show(args.show, manifest)
        return 0
    started = time.monotonic()
    questions: list[dict[str, Any]] = []
    for path in args.questions:
        questions += read_jsonl(path, problems)
    ids = Counter(str(q.get("id")) for q in questions)
    for qid, count in ids.items():
        if count > 1:
            problems.add(qid, f"id used {count} times")
    valid = [q for q in questions if check_schema(q, manifest, problems)]
    wanted: set[FileKey] = set()
    langs = {str(q.get("lang")) for q in questions}
    if args.all_files:
        wanted |= {key for key in manifest if key[0] in langs}
    for question in valid:
        for g in question["gold"]:
            entry = resolve(question, g["file"], manifest)
            assert entry is not None
            wanted.add((entry["_half"], entry["file"]))
    pages = check_files(manifest, wanted, problems)
    by_eye = 0
    for question in valid:
        if question["type"] != "unanswerable":
            by_eye += check_keys(question, manifest, pages, problems)
    by_type = Counter(str(q.get("type")) for q in questions)
    ci = Counter(str(q.get("type")) for q in questions if q.get("ci") is True)
    ci_files = {key for key, entry in manifest.items() if entry["ci"] and key[0] in langs}
    print(
        f"{len(questions)} questions ({', '.join(f'{t} {by_type[t]}' for t in TYPES)}); "
        f"ci: {ci.total()} questions ({', '.join(f'{t} {ci[t]}' for t in TYPES)}), "
        f"{len(ci_files)} ci files of {sum(manifest[key]['pages'] for key in ci_files)} pages; "
        f"{len(pages)} files read in {time.monotonic() - started:.1f} s"
    )
    if by_eye:
        print(f"{by_eye} picture keys on photos checked by eye, not in their page text")
    print(f"{len(problems.lines)} failures" if problems.lines else "all checks passed")
    return 1 if problems.lines else 0


if __name__ == "__main__":
    sys.exit(main())

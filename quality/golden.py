"""The rules of a collection's golden questions: added by hand, made from a feedback item
("turn into a test"), imported and exported as JSON Lines in the public evaluation's format
(eval/questions.jsonl). The writes are quality.actions' `do_*`, which go through these
checks, so that the page, the API and an import keep the same rules.

`check_*` raise ValidationError with a message a person can act on. A gold entry without a
page (or with page 0) is any page of its file: the public format needs a page, so an import
accepts a missing one and an export leaves it out."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Max
from django.utils.translation import gettext as _

from assistant.retrieval.evaluation import LANGS, TYPES, UNANSWERABLE, QuestionFileError, parse_question
from common import jsonlimits
from common.language import language_of
from common.text import storable
from knowledge.models import Collection, Document
from portal.models import User
from quality.models import Feedback, GoldenQuestion

MAX_QUESTION = 2000
MAX_KEY = GoldenQuestion._meta.get_field("key").max_length or 100
MAX_ANSWER_KEY = 40  # a correction this short becomes the question's answer key
MAX_LINES = 5000  # questions one import takes
MAX_IMPORT_BYTES = 5 << 20
FIELDS = ("key", "question", "lang", "kind", "gold", "keys", "history")


@dataclass
class ImportResult:
    imported: int = 0
    updated: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)  # (line number, message); 0: the whole file

    @property
    def stored(self) -> int:
        """Questions added or changed: none means the import was refused as a whole."""
        return self.imported + self.updated


# Checks


def check_question(
    collection: Collection, values: dict[str, Any], *, golden: GoldenQuestion | None = None
) -> dict[str, Any]:
    """The fields of a golden question of `collection`, cleaned: `values` holds any of FIELDS
    (a missing one keeps `golden`'s value, or its default for a new question)."""
    check_storable(values)  # before any of them reaches a query
    current = (
        golden.as_line() if golden else {"id": "", "lang": "", "type": "fact", "gold": [], "keys": [], "history": []}
    )
    question = _text(values.get("question", current.get("question", "")))
    if not question:
        raise ValidationError(_("Write the question."))
    if len(question) > MAX_QUESTION:
        raise ValidationError(
            _("The question is %(length)d characters long; at most %(limit)d are kept.")
            % {"length": len(question), "limit": MAX_QUESTION}
        )
    lang = _text(values.get("lang", current["lang"])) or language_of(question)
    if lang not in LANGS:
        raise ValidationError(
            _("The language must be one of %(langs)s, not “%(lang)s”.") % {"langs": ", ".join(LANGS), "lang": lang}
        )
    kind = _text(values.get("kind", current["type"]))
    if kind not in TYPES:
        raise ValidationError(
            _("The kind must be one of %(kinds)s, not “%(kind)s”.") % {"kinds": ", ".join(TYPES), "kind": kind}
        )
    gold = check_gold(collection, values.get("gold", current["gold"]), kind)
    keys = check_keys(values.get("keys", current["keys"]), kind)
    history = check_history(values.get("history", current["history"]))
    key = check_key(collection, _text(values.get("key", current["id"])), golden)
    return {
        "key": key,
        "question": question,
        "lang": lang,
        "kind": kind,
        "gold": gold,
        "keys": keys,
        "history": history,
    }


def check_key(collection: Collection, key: str, golden: GoldenQuestion | None = None) -> str:
    """The question's id, unique in the collection; "q-<n>" when none is given."""
    if not key:
        return next_key(collection)
    if len(key) > MAX_KEY:
        raise ValidationError(_("The id is longer than %(limit)d characters.") % {"limit": MAX_KEY})
    taken = GoldenQuestion.objects.filter(collection=collection, key=key)
    if golden is not None:
        taken = taken.exclude(pk=golden.pk)
    if taken.exists():
        raise ValidationError(_("The collection already has a golden question with the id “%(key)s”.") % {"key": key})
    return key


def next_key(collection: Collection) -> str:
    used = set(GoldenQuestion.objects.filter(collection=collection, key__startswith="q-").values_list("key", flat=True))
    number = GoldenQuestion.objects.filter(collection=collection).count() + 1
    while f"q-{number}" in used:
        number += 1
    return f"q-{number}"


def check_gold(collection: Collection, value: object, kind: str) -> list[dict[str, Any]]:
    """[{"file", "page"}]: each file a document of the collection (by name), each page from 1
    and within the document's pages when they are known; no page (or 0): any page. An
    unanswerable question has none; every other kind at least one."""
    if value in (None, ""):
        value = []
    if not isinstance(value, list):
        raise ValidationError(_('The expected pages must be a list of {"file", "page"} objects.'))
    if kind == UNANSWERABLE:
        if value:
            raise ValidationError(_("A question that should be abstained from has no expected page."))
        return []
    if not value:
        raise ValidationError(_("Choose the file that answers the question."))
    pages = dict(
        Document.objects.filter(collection=collection)
        .values("name")
        .annotate(most=Max("page_count"))
        .values_list("name", "most")
    )
    gold: list[dict[str, Any]] = []
    for entry in value:
        file, page = (entry.get("file"), entry.get("page")) if isinstance(entry, dict) else (None, None)
        if not isinstance(file, str) or not file.strip():
            raise ValidationError(_('Each expected page needs a "file": the name of a document of the collection.'))
        if file not in pages:
            raise ValidationError(_("The collection has no document named “%(file)s”.") % {"file": file})
        if page in (None, ""):
            page = 0
        if isinstance(page, bool) or not isinstance(page, int) or page < 0:
            raise ValidationError(
                _("The page of “%(file)s” must be a whole number from 1 (or none: any page).") % {"file": file}
            )
        known = pages[file] or 0
        if known and page > known:
            raise ValidationError(
                _("“%(file)s” has %(count)d pages; there is no page %(page)d.")
                % {"file": file, "count": known, "page": page}
            )
        entry = {"file": file, "page": page} if page else {"file": file}
        if entry not in gold:
            gold.append(entry)
    return gold


def check_keys(value: object, kind: str) -> list[str | list[str]]:
    """["value", ["spelling", "other spelling"]]: what a right answer must say, each element
    in any of its spellings."""
    if value in (None, ""):
        value = []
    if not isinstance(value, list):
        raise ValidationError(_("The answer keys must be a list."))
    keys: list[str | list[str]] = []
    for item in value:
        spellings = [item] if isinstance(item, str) else item
        if not isinstance(spellings, list) or not all(isinstance(s, str) for s in spellings):
            raise ValidationError(_("Each answer key is a text or a list of alternative spellings."))
        spellings = [s.strip() for s in spellings if s.strip()]
        if spellings:
            keys.append(spellings[0] if len(spellings) == 1 else spellings)
    if kind == UNANSWERABLE and keys:
        raise ValidationError(_("A question that should be abstained from has no answer keys."))
    return keys


def check_history(value: object) -> list[dict[str, str]]:
    """The earlier turns of a follow-up: [{"role": "user" or "assistant", "content"}]."""
    if value in (None, ""):
        value = []
    if not isinstance(value, list):
        raise ValidationError(_('The earlier turns must be a list of {"role", "content"} objects.'))
    turns = []
    for item in value:
        role, content = (item.get("role"), item.get("content")) if isinstance(item, dict) else (None, None)
        if role not in ("user", "assistant") or not isinstance(content, str) or not content.strip():
            raise ValidationError(_("Each earlier turn needs a role (user or assistant) and its text."))
        turns.append({"role": role, "content": content})
    return turns


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ("" if value is None else str(value).strip())


def check_field_names(fields: dict[str, Any]) -> None:
    """A programming error, not a person's: the writes take only FIELDS."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise TypeError(f"not fields of a golden question: {', '.join(sorted(unknown))}")


def check_storable(values: object) -> None:
    """PostgreSQL stores neither a NUL character nor half of a surrogate pair (which JSON's
    "\\u0000" and "\\ud800" escapes can make), in text or in JSON: refused here, with a
    reason, rather than failing the whole request when the row is written."""
    if isinstance(values, str):
        if not storable(values):
            raise ValidationError(
                _("The text holds a character that cannot be stored: a NUL (\\u0000) or half of a surrogate pair.")
            )
    elif isinstance(values, dict):
        for value in values.values():
            check_storable(value)
    elif isinstance(values, list | tuple):
        for value in values:
            check_storable(value)


# JSON Lines


def read_import(file: IO[bytes]) -> str:
    """The text of an import, from an uploaded file or a request's body: at most
    MAX_IMPORT_BYTES, UTF-8 (a byte order mark is dropped). The page and the API both read
    an import through this, so that both refuse the same files with the same reason."""
    data = file.read(MAX_IMPORT_BYTES + 1)
    if len(data) > MAX_IMPORT_BYTES:
        raise ValidationError(_("The file is larger than %(size)d MB: split it.") % {"size": MAX_IMPORT_BYTES >> 20})
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            _("The file is not UTF-8 text (byte %(position)d is not): save it as UTF-8 and import it again.")
            % {"position": exc.start + 1}
        ) from None


def import_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each question of an import; ValidationError when the file as a
    whole cannot be imported (no question, or more than MAX_LINES). Lines are split on "\\n"
    only: U+2028 or U+0085 inside a JSON string are part of the text (common.jsonlimits)."""
    lines = list(jsonlimits.jsonl_lines(text))
    if not lines:
        raise ValidationError(_("The file holds no questions."))
    if len(lines) > MAX_LINES:
        raise ValidationError(_("The file has more than %(limit)d questions; split it.") % {"limit": MAX_LINES})
    return lines


def parse_line(raw: str) -> dict[str, Any]:
    """One line of the public format as the fields of a golden question. The line is read by
    the public evaluation's own parser (assistant.retrieval.evaluation.parse_question), with
    a gold entry's missing page read as any page; the checks against the collection follow
    when the question is written."""
    entry = _decode(raw)
    if not isinstance(entry, dict):
        raise ValidationError(_("Each line must be a JSON object."))
    if not isinstance(entry.get("id"), str) or not entry["id"].strip():
        raise ValidationError(_('"id" must be a non-empty text.'))
    for name in ("question", "lang", "type"):
        if not isinstance(entry.get(name), str) or not entry[name].strip():
            raise ValidationError(_('"%(name)s" must be a non-empty text.') % {"name": name})
    if entry["lang"] not in LANGS:
        raise ValidationError(
            _("The language must be one of %(langs)s, not “%(lang)s”.")
            % {"langs": ", ".join(LANGS), "lang": entry["lang"]}
        )
    if entry["type"] not in TYPES:
        raise ValidationError(
            _("The kind must be one of %(kinds)s, not “%(kind)s”.") % {"kinds": ", ".join(TYPES), "kind": entry["type"]}
        )
    gold = entry.get("gold") or []
    if not isinstance(gold, list):
        raise ValidationError(_('The expected pages must be a list of {"file", "page"} objects.'))
    keys = check_keys(entry.get("keys"), entry["type"])
    history = check_history(entry.get("history"))
    # The public parser needs a page: any page is read as page 1 there.
    paged = [{**item, "page": 1} if isinstance(item, dict) and item.get("page") in (None, 0) else item for item in gold]
    where = "line"
    try:
        parse_question(json.dumps({**entry, "gold": paged}), where)
    except QuestionFileError as exc:
        raise ValidationError(str(exc).removeprefix(f"{where}: ")) from None
    values = {
        "key": entry["id"].strip(),
        "question": entry["question"],
        "lang": entry["lang"],
        "kind": entry["type"],
        "gold": gold,
        "keys": keys,
        "history": history,
    }
    check_storable(values)  # the id is looked up before the question is checked in full
    return values


def _decode(raw: str) -> Any:
    try:
        return jsonlimits.loads(raw)
    except jsonlimits.TooDeep as exc:
        raise ValidationError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise ValidationError(
            _("Not valid JSON (%(reason)s at column %(column)d).") % {"reason": exc.msg, "column": exc.colno}
        ) from None
    except ValueError:  # a number of more than 4,300 digits, say
        raise ValidationError(_("Not valid JSON: a value could not be read.")) from None


def export_jsonl(collection: Collection) -> str:
    """The collection's golden questions, one line each, in the public evaluation's format."""
    questions = GoldenQuestion.objects.filter(collection=collection).order_by("key", "pk")
    return "".join(json.dumps(golden.as_line(), ensure_ascii=False) + "\n" for golden in questions)


# From feedback


def from_feedback(feedback: Feedback, collection: Collection, user: User) -> dict[str, Any]:
    """The fields of the golden question "turn into a test" makes: the feedback's question,
    with the corrected page expected where the person gave one, else (a helpful answer) the
    page its first citation in the collection named. A correction of 40 characters or fewer
    becomes the answer key. Its id is "feedback-<id>"."""
    if not Collection.objects.manageable_by(user).filter(pk=collection.pk).exists():
        raise PermissionDenied(_("Only the owner or a team admin can do this to the collection."))
    if not feedback.collections.filter(pk=collection.pk).exists():
        raise ValidationError(_("This answer did not search “%(collection)s”.") % {"collection": collection.name})
    key = f"feedback-{feedback.pk}"
    if GoldenQuestion.objects.filter(collection=collection, key=key).exists():
        raise ValidationError(_("This feedback is already the golden question “%(key)s”.") % {"key": key})
    answer = feedback.correct_answer.strip()
    return {
        "key": key,
        "question": feedback.question,
        "lang": language_of(feedback.question),
        "kind": "fact",
        "gold": _expected(feedback, collection),
        "keys": [answer] if answer and len(answer) <= MAX_ANSWER_KEY else [],
    }


def _expected(feedback: Feedback, collection: Collection) -> list[dict[str, Any]]:
    document = feedback.correct_document
    if document is not None:
        if document.collection_id != collection.pk:
            raise ValidationError(
                _("The right page is in “%(document)s”, which is not in this collection: make the test there.")
                % {"document": document.name}
            )
        return [{"file": document.name, "page": feedback.correct_page or 0}]
    if feedback.rating == Feedback.Rating.UP:
        cited = _cited_in(feedback.citations, collection)
        if cited:
            return [cited[0]]
        raise ValidationError(
            _("The answer cited no page of this collection: add the right page to the feedback first.")
        )
    raise ValidationError(_("The answer was not helpful: add the right page to the feedback first."))


def _cited_in(citations: Iterable[Any], collection: Collection) -> Sequence[dict[str, Any]]:
    names = set(Document.objects.filter(collection=collection).values_list("name", flat=True))
    found = []
    for citation in citations:
        if not isinstance(citation, dict) or citation.get("file") not in names:
            continue
        if citation.get("collection_id") not in (None, collection.pk):
            continue
        page = citation.get("page")
        found.append({"file": citation["file"], "page": page if isinstance(page, int) and page > 0 else 0})
    return found

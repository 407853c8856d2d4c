"""Writes of the quality loop (Zulip's `zerver/actions/`): golden questions added, changed,
imported, deleted or made from feedback, evaluation runs started, feedback given. Pages, the
API, the gate and commands call these and never repeat their rules (quality.golden's and
quality.feedback's `check_*`); they check access first (`access_collection(..., manage=True)`).

What decides whether a new index version may flip is recorded in the audit log, in the
change's own transaction, so that a write that fails leaves no entry: every change to a
collection's golden questions (an import as one entry with its counts) and every evaluation a
person starts. Recorded elsewhere: the largest drop the gate allows is a collection setting
(`collection.settings`, knowledge.actions), a held version flipped anyway is
`index.flip_anyway` (ingestion.actions.do_activate_version), and a gate run's outcome is
`index.flip` or `index.held`. Not recorded: feedback, a person's own note on their own
answer rather than a change to the team's collection (its page lists it to the collection's
managers)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import Http404
from django.utils.translation import gettext as _

from assistant.models import Conversation, Message
from audit.log import record
from audit.models import Action
from knowledge.events import send_collection_event_on_commit
from knowledge.models import Collection, Document, IndexVersion
from portal.models import User
from portal.typing import AnyUser
from quality import evaluation, feedback, golden, runs
from quality.models import EvaluationRun, Feedback, GoldenQuestion

# Golden questions


def do_add_golden(collection: Collection, user: User | None, /, **fields: Any) -> GoldenQuestion:
    """A new golden question of the collection; `fields` are any of golden.FIELDS."""
    golden.check_field_names(fields)
    cleaned = golden.check_question(collection, fields)
    with transaction.atomic():
        added = GoldenQuestion.objects.create(collection=collection, created_by=user, **cleaned)
        record(Action.GOLDEN_CREATE, added, **collection.audit_scope())
    return added


def do_update_golden(question: GoldenQuestion, /, **fields: Any) -> GoldenQuestion:
    """The question with the `fields` given changed, the others kept; the entry lists each
    changed field before → after."""
    golden.check_field_names(fields)
    collection = question.collection
    with transaction.atomic():
        changes = _apply(question, golden.check_question(collection, fields, golden=question))
        if changes:
            record(Action.GOLDEN_UPDATE, question, changes=changes, **collection.audit_scope())
    return question


def do_delete_golden(question: GoldenQuestion) -> None:
    with transaction.atomic():
        record(Action.GOLDEN_DELETE, question, **question.collection.audit_scope())
        question.delete()


def do_golden_from_feedback(item: Feedback, collection: Collection, user: User) -> GoldenQuestion:
    """ "Turn into a test": the feedback as a golden question of `collection` (golden.from_feedback)."""
    fields = golden.from_feedback(item, collection, user)
    cleaned = golden.check_question(collection, fields)
    with transaction.atomic():
        made = GoldenQuestion.objects.create(collection=collection, created_by=user, feedback=item, **cleaned)
        record(Action.GOLDEN_FROM_FEEDBACK, made, changes={"feedback": (None, item.pk)}, **collection.audit_scope())
    return made


def do_import_golden(collection: Collection, user: User | None, text: str) -> golden.ImportResult:
    """Each line of a JSON Lines text (the public evaluation's format) as a golden question of
    the collection; a line whose id the collection has updates that question. A bad line (not
    JSON, nested too deep, an unknown language or kind, a file the collection lacks, an id
    used twice in the file) is reported with its number and reason, and the good ones are
    stored: all in one transaction, so that an unexpected failure stores none of them. One
    entry records the counts; an import that stored nothing records none."""
    result = golden.ImportResult()
    try:
        lines = golden.import_lines(text)
    except ValidationError as exc:
        result.errors.append((0, " ".join(exc.messages)))
        return result
    seen: dict[str, int] = {}
    with transaction.atomic():
        for number, raw in lines:
            try:
                _import_line(collection, user, golden.parse_line(raw), number, seen, result)
            except ValidationError as exc:
                result.errors.append((number, " ".join(exc.messages)))
        if result.stored:
            counts = {"imported": result.imported, "updated": result.updated, "failed": len(result.errors)}
            changes = {name: (None, count) for name, count in counts.items()}
            record(Action.GOLDEN_IMPORT, collection, changes=changes, **collection.audit_scope())
    return result


def _import_line(
    collection: Collection,
    user: User | None,
    values: dict[str, Any],
    number: int,
    seen: dict[str, int],
    result: golden.ImportResult,
) -> None:
    key = values["key"]
    if key in seen:
        raise ValidationError(
            _("The id “%(key)s” is used twice in the file (first on line %(line)d).") % {"key": key, "line": seen[key]}
        )
    seen[key] = number
    existing = GoldenQuestion.objects.select_for_update().filter(collection=collection, key=key).first()
    # Checked in full before anything of the line is written: a refused line leaves nothing.
    cleaned = golden.check_question(collection, values, golden=existing)
    if existing is None:
        GoldenQuestion.objects.create(collection=collection, created_by=user, **cleaned)
        result.imported += 1
    else:
        _apply(existing, cleaned)
        result.updated += 1


def _apply(question: GoldenQuestion, cleaned: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Set and save the cleaned fields; returns those that changed, before → after."""
    changes = {name: (getattr(question, name), value) for name, value in cleaned.items()}
    changes = {name: pair for name, pair in changes.items() if pair[0] != pair[1]}
    for name, value in cleaned.items():
        setattr(question, name, value)
    question.save()
    return changes


# Evaluation runs


def do_start_evaluation(
    collection: Collection,
    version: IndexVersion,
    *,
    user: User | None = None,
    answers: bool = False,
    baseline: IndexVersion | None = None,
) -> EvaluationRun:
    """Queue an evaluation of `version`, run by the `evaluation` worker when the transaction
    commits. With a `baseline` it is the gate's run (quality.gate), which also evaluates the
    active version and decides the flip; a run a person asks for is recorded."""
    if version.collection_id != collection.pk:
        raise ValidationError(_("That index version belongs to another collection."))
    found = evaluation.questions_of(collection)
    if not any(question.answerable for question in found.usable) and not (answers and found.usable):
        raise ValidationError(_("The collection has no golden question to evaluate with (stale ones are left out)."))
    with transaction.atomic():
        run = EvaluationRun.objects.create(
            collection=collection,
            version=version,
            version_number=version.number,
            baseline=baseline,
            baseline_number=baseline.number if baseline else None,
            purpose=EvaluationRun.Purpose.GATE if baseline else EvaluationRun.Purpose.MANUAL,
            answers=answers,
            requested_by=user,
            total=runs.count_steps(found, answers, gate=baseline is not None),
            stale=len(found.stale),
        )
        if baseline is None:
            changes = {"answers": (None, answers)}
            label = f"{collection} v{version.number}"
            record(Action.EVALUATION_START, run, label=label, changes=changes, **collection.audit_scope())
        runs.enqueue(run)
        send_collection_event_on_commit(collection.pk, runs.progress_event(run))
    return run


# Feedback: a person's own note on their own answer, not recorded in the audit log.


def do_give_feedback(
    user: AnyUser,
    message: Message,
    rating: str,
    comment: str = "",
    correct_answer: str = "",
    correct_document: Document | int | None = None,
    correct_page: int | None = None,
) -> Feedback:
    """Creates or replaces the user's feedback on one answer of their own conversation."""
    if not Conversation.objects.visible_to(user).filter(pk=message.conversation_id).exists():
        raise Http404(_("Not found."))
    feedback.check_rateable(message)
    if rating not in Feedback.Rating.values:
        raise ValidationError({"rating": [_("Rate the answer up or down.")]})
    document = feedback.check_correction(user, message, correct_document, correct_page)
    given = {
        "user": user,
        "rating": rating,
        "comment": comment.strip(),
        "correct_answer": correct_answer.strip(),
        "correct_document": document,
        "correct_page": correct_page if document else None,
        **feedback.snapshot_of(message),
    }
    with transaction.atomic():
        item, _created = Feedback.objects.update_or_create(message=message, defaults=given)
        item.collections.set(Collection.objects.filter(pk__in=feedback.searched_ids(message)))
    return item


def do_delete_feedback(user: AnyUser, message: Message) -> None:
    """Withdraws the user's feedback on one of their answers; 404 when there is none."""
    item = feedback.feedback_on(user, message)
    if item is None:
        raise Http404(_("You have not given feedback on this answer."))
    item.delete()

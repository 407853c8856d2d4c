"""Evaluation runs: queued by a person (a collection's Quality page, the API) or by the gate
when a new index version is built (quality/gate.py), both through
quality.actions.do_start_evaluation, and executed here by the `evaluation` worker
(quality/tasks.py), which gives way to answers being written between questions."""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from assistant.busy import wait_until_idle
from audit.log import record
from audit.models import Action
from common.runs import end_run
from ingestion import versions
from knowledge.events import send_collection_event, send_collection_event_on_commit
from knowledge.models import Collection, IndexVersion
from portal.models import User
from quality import evaluation
from quality.models import EvaluationRun

log = logging.getLogger(__name__)

EVENT_INTERVAL = 1.0  # seconds between progress events


def enqueue(run: EvaluationRun) -> None:
    """Send the run's task once the transaction that created it commits (a seam the gate's
    tests replace to evaluate in their own process)."""
    run.send()


def count_steps(found: evaluation.Questions, answers: bool, *, gate: bool) -> int:
    """The questions a run searches (twice for a gate run: the new version and the active
    one) and answers: its progress bar's length."""
    searched = sum(question.answerable for question in found.usable)
    return searched * (2 if gate else 1) + (len(found.usable) if answers else 0)


def execute(run: EvaluationRun) -> EvaluationRun:
    """Evaluate the run's version (and its baseline), store the figures, and for a gate run
    flip the version or hold it back. A failure holds a gate's version back too."""
    started = time.perf_counter()
    try:
        summary, per_question = _measure(run)
    except Exception as exc:
        log.exception("Evaluation run %s failed", run.pk)
        _finish(run, started, status=EvaluationRun.Status.FAILED, error=str(exc) or type(exc).__name__)
        if run.purpose == EvaluationRun.Purpose.GATE:
            _hold(run)
        return run
    run.summary, run.per_question = summary, per_question
    if run.purpose == EvaluationRun.Purpose.GATE and "baseline" in summary:
        run.drops = evaluation.drops(summary["baseline"], summary["version"])
    _finish(run, started, status=EvaluationRun.Status.SUCCEEDED)
    if run.purpose == EvaluationRun.Purpose.GATE:
        _decide(run)
    return run


def _measure(run: EvaluationRun) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    version = run.version
    if version is None:
        raise ValidationError(_("The index version was deleted before it could be evaluated."))
    found = evaluation.questions_of(run.collection)
    user = run.requested_by or searcher(run.collection)
    ticker = _Ticker(run)
    result = evaluation.retrieval(user, version, found.usable, ticker.step)
    summary: dict[str, Any] = {"version": result["summary"], "mean_ms": round(result["mean_ms"], 1)}
    per_question = result["per_question"]
    if run.baseline is not None:
        before = evaluation.retrieval(user, run.baseline, found.usable, ticker.step)
        summary["baseline"] = before["summary"]
        ranks = {row["id"]: row["rank"] for row in before["per_question"]}
        per_question = [{**row, "baseline_rank": ranks.get(row["id"])} for row in per_question]
    if run.answers:
        scored = evaluation.answers(user, version, found.usable, ticker.step)
        summary["answers"] = scored["summary"]
        answered = {row["id"]: row for row in scored["per_question"]}
        per_question = [{**row, **answered.get(row["id"], {})} for row in per_question] + [
            row for key, row in answered.items() if key not in {r["id"] for r in per_question}
        ]
    summary["stale"] = found.stale
    return summary, per_question


class _Ticker:
    """Counts the run's steps: a heartbeat and, at most once a second, a progress event;
    before each step it gives way to answers being written (at most EVALUATION_IDLE_WAIT)."""

    def __init__(self, run: EvaluationRun) -> None:
        self.run = run
        self.last = 0.0

    def step(self, _number: int, _of: int) -> None:
        self.run.progress += 1
        EvaluationRun.objects.filter(pk=self.run.pk).update(progress=self.run.progress, heartbeat_at=timezone.now())
        if time.monotonic() - self.last >= EVENT_INTERVAL or self.run.progress == self.run.total:
            self.last = time.monotonic()
            _send(self.run)
        wait_until_idle(settings.EVALUATION_IDLE_WAIT, ingestion=False, what="evaluate")


def _finish(run: EvaluationRun, started: float, *, status: str, error: str = "") -> None:
    end_run(
        run,
        status,
        error=error[:2000],
        seconds=round(time.perf_counter() - started, 2),
        summary=run.summary,
        per_question=run.per_question,
        drops=run.drops,
        progress=run.progress,
    )
    _send(run)


def _decide(run: EvaluationRun) -> None:
    """Flip the version when no gated metric fell by more than the collection allows."""
    building = IndexVersion.objects.filter(status=IndexVersion.Status.BUILDING)
    version = building.filter(pk=run.version_id).first() if run.version_id else None
    if version is None:
        return  # deleted, or replaced by a newer build meanwhile
    if evaluation.passes(run.drops, evaluation.allowed_drop(run.collection)):
        versions.flip(run.collection, version)
        _set_decision(run, EvaluationRun.Decision.FLIPPED)
    else:
        _hold(run)


def _hold(run: EvaluationRun) -> None:
    version = run.version
    if version is None:
        return
    with transaction.atomic():
        held = IndexVersion.objects.filter(pk=version.pk, status=IndexVersion.Status.BUILDING).update(
            status=IndexVersion.Status.HELD
        )
        if held:
            changes = {metric: (None, points) for metric, points in run.drops.items()}
            label = f"{run.collection} v{version.number}"
            record(Action.INDEX_HELD, version, label=label, changes=changes, **run.collection.audit_scope())
            send_collection_event_on_commit(run.collection_id, {"type": "index.held", "version": version.number})
    _set_decision(run, EvaluationRun.Decision.HELD)


def _set_decision(run: EvaluationRun, decision: str) -> None:
    run.decision = decision
    EvaluationRun.objects.filter(pk=run.pk).update(decision=decision)
    _send(run)


def progress_event(run: EvaluationRun) -> dict[str, Any]:
    return {
        "type": "evaluation.progress",
        "run": run.pk,
        "version": run.version_number,
        "status": run.status,
        "done": run.progress,
        "total": run.total,
        "decision": run.decision,
    }


def _send(run: EvaluationRun) -> None:
    try:
        send_collection_event(run.collection_id, progress_event(run))
    except Exception as exc:  # watchers miss an update; the run goes on
        log.warning("Evaluation run %s: progress not sent: %s", run.pk, exc)


def searcher(collection: Collection) -> User:
    """Whom an evaluation that nobody asked for (the gate) searches as: the owner, or the
    team's first admin. The scope is pinned to the version, so this names the user only."""
    found = collection.first_admin()
    if found is None:
        raise ValidationError(_("The collection has no owner or team admin to evaluate as."))
    return found

"""A collection's Evaluations page: its evaluation runs, each metric across index versions
(a plot drawn here), a held-back version's comparison with the active one, and the buttons
that evaluate a version now or flip a held one anyway."""

from __future__ import annotations

import io
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST, require_safe

from assistant.retrieval.evaluation import METRICS
from ingestion.actions import do_activate_version
from knowledge.access import access_collection, collection_role
from knowledge.feedback import report
from knowledge.models import IndexVersion, Role
from portal.typing import AuthedRequest
from quality import actions, evaluation
from quality.forms import EvaluateForm
from quality.models import EvaluationRun

SHOWN_RUNS = 20


@login_required
@require_safe
def quality_page(request: AuthedRequest, collection_id: int) -> HttpResponse:
    collection = access_collection(request.user, collection_id)
    role = collection_role(request.user, collection)
    can_manage = role == Role.ADMIN
    recent = list(EvaluationRun.objects.filter(collection=collection).select_related("requested_by")[:SHOWN_RUNS])
    held = IndexVersion.objects.filter(collection=collection, status=IndexVersion.Status.HELD).first()
    verdict = (
        EvaluationRun.objects.filter(collection=collection, version=held, purpose=EvaluationRun.Purpose.GATE).first()
        if held
        else None
    )
    found = evaluation.questions_of(collection)
    context: dict[str, Any] = {
        "collection": collection,
        "can_manage": can_manage,
        "runs": [table_row(run) for run in recent],
        "held": held,
        "verdict": verdict,
        "comparison": comparison(verdict) if verdict else [],
        "allowed_drop": evaluation.allowed_drop(collection),
        "usable": len(found.usable),
        "stale": found.stale,
        "has_plot": EvaluationRun.objects.filter(collection=collection, status=EvaluationRun.Status.SUCCEEDED).exists(),
        "form": EvaluateForm(collection),
    }
    return render(request, "quality/evaluations.html", context)


def table_row(run: EvaluationRun) -> dict[str, Any]:
    """A run with its overall hit@1, hit@5 and MRR, and the answers' key coverage if scored."""
    overall = (run.summary.get("version") or {}).get("overall") or {}
    answers = (run.summary.get("answers") or {}).get("overall") or {}
    return {
        "run": run,
        "cells": [overall.get(metric) for metric in evaluation.GATED],
        "coverage": answers.get("key_coverage"),
    }


def comparison(run: EvaluationRun) -> list[dict[str, Any]]:
    """Rows of a gate run's table: each metric before (the active version), after (the new
    one) and the drop in points, overall."""
    before = (run.summary.get("baseline") or {}).get("overall") or {}
    after = (run.summary.get("version") or {}).get("overall") or {}
    return [
        {
            "metric": metric,
            "before": before.get(metric),
            "after": after.get(metric),
            "drop": run.drops.get(metric),
            "gated": metric in evaluation.GATED,
        }
        for metric in METRICS
        if metric in before or metric in after
    ]


@login_required
@require_POST
def evaluate(request: AuthedRequest, collection_id: int) -> HttpResponse:
    collection = access_collection(request.user, collection_id, manage=True)
    form = EvaluateForm(collection, request.POST)
    if not form.is_valid():
        for errors in form.errors.values():
            for error in errors:
                messages.error(request, str(error))
        return redirect("collection-quality", collection.pk)
    version, answers = form.cleaned_data["version"], form.cleaned_data["answers"]
    report(
        request,
        lambda: actions.do_start_evaluation(collection, version, user=request.user, answers=answers),
        _("Evaluation queued: its progress shows below."),
    )
    return redirect("collection-quality", collection.pk)


@login_required
@require_POST
def flip_anyway(request: AuthedRequest, collection_id: int, number: int) -> HttpResponse:
    collection = access_collection(request.user, collection_id, manage=True)
    version = IndexVersion.objects.filter(collection=collection, number=number, status=IndexVersion.Status.HELD).first()
    if version is None:
        raise Http404(_("No version with that number is held back."))
    success = _("Version %(number)s now answers questions.") % {"number": version.number}
    report(request, lambda: do_activate_version(version), success)
    return redirect("collection-quality", collection.pk)


@login_required
@require_safe
def plot(request: AuthedRequest, collection_id: int) -> HttpResponse:
    """Each retrieval metric (overall) across the versions evaluated: the newest successful
    run of each version, as SVG drawn by Matplotlib (no script, no CDN)."""
    collection = access_collection(request.user, collection_id)
    points = across_versions(collection.pk)
    return HttpResponse(draw(points, title=collection.name), content_type="image/svg+xml")


def across_versions(collection_id: int) -> list[tuple[int, dict[str, float]]]:
    """(version number, overall means) of the newest successful run of each version."""
    newest: dict[int, dict[str, float]] = {}
    succeeded = EvaluationRun.objects.filter(collection_id=collection_id, status=EvaluationRun.Status.SUCCEEDED)
    for number, summary in succeeded.order_by("-finished_at", "-pk").values_list("version_number", "summary"):
        overall = (summary.get("version") or {}).get("overall")
        if number not in newest and overall:
            newest[number] = overall
    return sorted(newest.items())


def draw(points: list[tuple[int, dict[str, float]]], *, title: str) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 3.6))
    numbers = [number for number, _overall in points]
    for metric in METRICS:
        axis.plot(numbers, [overall.get(metric, 0.0) for _number, overall in points], marker="o", label=metric)
    axis.set_xticks(numbers, [f"v{number}" for number in numbers])
    axis.set_ylim(0, 1.05)
    axis.set_xlabel(_("Index version"))
    axis.grid(alpha=0.3)
    axis.legend(loc="lower left", ncol=len(METRICS), fontsize="small")
    axis.set_title(_("Retrieval on the golden questions: %(collection)s") % {"collection": title})
    figure.tight_layout()
    out = io.BytesIO()
    figure.savefig(out, format="svg")
    plt.close(figure)
    return out.getvalue()


urlpatterns = [
    path("collections/<int:collection_id>/quality/", quality_page, name="collection-quality"),
    path("collections/<int:collection_id>/quality/evaluate/", evaluate, name="collection-evaluate"),
    path("collections/<int:collection_id>/quality/plot.svg", plot, name="collection-quality-plot"),
    path(
        "collections/<int:collection_id>/quality/versions/<int:number>/flip/",
        flip_anyway,
        name="collection-flip-anyway",
    ),
]

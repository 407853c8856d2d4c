"""What the admin shows of every kind of run (common.runs), in the same columns: each app's
run admin starts its list with RUN_COLUMNS and adds what its runs are about after them."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from common.runs import Run

RUN_COLUMNS = ["__str__", "status", "steps", "requested_by", "created_at", "started_at", "finished_at"]
RUN_FIELDS = [
    "status",
    "progress",
    "total",
    "error",
    "requested_by",
    "created_at",
    "started_at",
    "heartbeat_at",
    "finished_at",
]


class RunColumns:
    """A mixin for a run's ModelAdmin (its list_display starts with RUN_COLUMNS); runs are made by the
    portal (uploads, syncs, evaluations), never added here."""

    @admin.display(description=_("done"))
    def steps(self, run: Run) -> str:
        return f"{run.progress}/{run.total}" if run.total else str(run.progress)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

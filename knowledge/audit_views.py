"""The audit log page: the entries the user may read (knowledge/audit_access.py), newest
first, 50 a page, filtered by GET parameters."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from audit.models import Entry
from knowledge.audit_access import AuditFilterForm, admin_teams, shown, visible_entries
from portal.typing import AuthedRequest

PAGE_SIZE = 50


# A value with a word this long (a SHA-256, a token's hash, a path) is shown clipped to its
# first characters with the whole in a tooltip; the page still holds it whole, for copying.
CLIPPED_WORD = 24


@dataclass(frozen=True)
class Value:
    text: str

    @property
    def clipped(self) -> bool:
        return any(len(word) > CLIPPED_WORD for word in self.text.split())


@dataclass(frozen=True)
class Change:
    field: str
    before: Value
    after: Value


@dataclass(frozen=True)
class Row:
    entry: Entry
    changes: list[Change]


def rows(entries: list[Entry]) -> list[Row]:
    return [Row(entry, changes(entry)) for entry in entries]


def changes(entry: Entry) -> list[Change]:
    """Each changed field's value before → after, as text ({"field": [before, after]})."""
    found = entry.changes if isinstance(entry.changes, dict) else {}
    shown_changes = []
    for field, pair in found.items():
        before, after = [*pair, None, None][:2] if isinstance(pair, list) else [None, pair]
        shown_changes.append(Change(field, Value(shown(before)), Value(shown(after))))
    return shown_changes


@login_required
@require_GET
def audit_log(request: AuthedRequest) -> HttpResponse:
    form = AuditFilterForm(request.GET, user=request.user)
    valid = form.is_valid()
    entries = form.filter(visible_entries(request.user)) if valid else Entry.objects.none()
    page = Paginator(entries, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    filters = query.urlencode()
    context = {
        "form": form,
        "page": page,
        "rows": rows(list(page.object_list)),
        "filters": filters,
        "export": reverse("audit-list") + "?" + (filters + "&" if filters else ""),
        "is_team_admin": admin_teams(request.user).exists(),
    }
    return render(request, "knowledge/audit.html", context, status=200 if valid else 400)

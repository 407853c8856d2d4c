"""My memory: what the assistant remembers about the signed-in user, to list, search, edit,
delete and export. Every call goes through assistant.memory.service, which answers for the
user it is given only: another user's memory id is MemoryNotFound there, a 404 here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import wraps
from typing import Any, Concatenate, ParamSpec

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.http import urlencode
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from assistant.memory.service import (
    MAX_TEXT,
    Memories,
    MemoryInputError,
    MemoryItem,
    MemoryNotFound,
    MemoryUnavailable,
    memories,
)
from portal.typing import AuthedRequest

PER_PAGE = 50
SEARCH_LIMIT = 50  # search results: one page, best first

P = ParamSpec("P")


class MemoryForm(forms.Form):
    text = forms.CharField(label=gettext_lazy("Memory"), max_length=MAX_TEXT, widget=forms.Textarea(attrs={"rows": 2}))


class DeleteAllForm(forms.Form):
    confirm = forms.BooleanField(
        label=gettext_lazy("Yes, delete everything the assistant remembers about me. This cannot be undone."),
        error_messages={"required": gettext_lazy("Tick the box to confirm.")},
    )


@dataclass(frozen=True)
class Row:
    """One memory as the page shows it: its dates parsed, its history, its edit form."""

    item: MemoryItem
    created: datetime | None
    updated: datetime | None
    history: list[dict[str, Any]]
    form: MemoryForm


def with_memory(
    view: Callable[Concatenate[AuthedRequest, Memories, P], HttpResponse],
) -> Callable[Concatenate[AuthedRequest, P], HttpResponse]:
    """Pass the memory service to the view; memory off is a page that says so (not a 500),
    and a memory id that is not the user's is a 404."""

    @wraps(view)
    def wrapped(request: AuthedRequest, *args: P.args, **kwargs: P.kwargs) -> HttpResponse:
        try:
            store = memories()
        except MemoryUnavailable as exc:
            return render(request, "assistant/memory.html", {"unavailable": str(exc)}, status=503)
        try:
            return view(request, store, *args, **kwargs)
        except MemoryNotFound:
            raise Http404(_("That memory does not exist.")) from None

    return wrapped


@login_required
@with_memory
def memory_page(request: AuthedRequest, store: Memories) -> HttpResponse:
    return _page(request, store)


@login_required
@require_POST
@with_memory
def memory_edit(request: AuthedRequest, store: Memories, memory_id: str) -> HttpResponse:
    item = store.get(request.user, memory_id)
    form = MemoryForm(request.POST, auto_id=_form_id(item))
    if form.is_valid():
        try:
            store.update(request.user, item.id, form.cleaned_data["text"])
        except MemoryInputError as exc:
            form.add_error("text", str(exc))
        else:
            messages.success(request, _("Memory updated."))
            return redirect(_back(request))
    return _page(request, store, invalid={item.id: form}, status=400)


@login_required
@require_POST
@with_memory
def memory_delete(request: AuthedRequest, store: Memories, memory_id: str) -> HttpResponse:
    store.delete(request.user, memory_id)
    messages.success(request, _("Memory deleted."))
    return redirect(_back(request))


@login_required
@require_POST
@with_memory
def memory_delete_all(request: AuthedRequest, store: Memories) -> HttpResponse:
    form = DeleteAllForm(request.POST)
    if not form.is_valid():
        return _page(request, store, delete_all=form, status=400)
    count = store.delete_all(request.user)
    if count:
        messages.success(request, _("All your memories deleted (%(count)d).") % {"count": count})
    else:
        messages.info(request, _("There were no memories to delete."))
    return redirect("my-memory")


def _page(
    request: AuthedRequest,
    store: Memories,
    *,
    invalid: dict[str, MemoryForm] | None = None,
    delete_all: DeleteAllForm | None = None,
    status: int = 200,
) -> HttpResponse:
    query = " ".join(request.GET.get("q", "").split())
    items = store.search(request.user, query, limit=SEARCH_LIMIT) if query else store.listing(request.user)
    page = Paginator(items, PER_PAGE).get_page(request.GET.get("page"))
    rows = [_row(store, request, item, (invalid or {}).get(item.id)) for item in page]
    context = {
        "query": query,
        "page": page,
        "rows": rows,
        "here": _here(request),
        "search_query": urlencode({"q": query}) if query else "",
        "delete_all_form": delete_all or DeleteAllForm(),
    }
    return render(request, "assistant/memory.html", context, status=status)


def _row(store: Memories, request: AuthedRequest, item: MemoryItem, form: MemoryForm | None) -> Row:
    history = [
        {**change, "when": _date(change["updated_at"] or change["created_at"])}
        for change in store.history(request.user, item.id)
    ]
    return Row(
        item=item,
        created=_date(item.created_at),
        updated=_date(item.updated_at),
        history=history,
        form=form or MemoryForm(initial={"text": item.text}, auto_id=_form_id(item)),
    )


def _form_id(item: MemoryItem) -> str:
    return f"memory-{item.id}-%s"  # one edit form per memory on the page: ids must differ


def _date(value: str | None) -> datetime | None:
    return parse_datetime(value) if value else None


def _here(request: AuthedRequest) -> str:
    """The page's search and page number, for the forms to come back to after a POST."""
    kept = {key: request.GET[key] for key in ("q", "page") if request.GET.get(key)}
    return f"?{urlencode(kept)}" if kept else ""


def _back(request: AuthedRequest) -> str:
    return reverse("my-memory") + _here(request)

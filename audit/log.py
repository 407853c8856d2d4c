"""Writing entries: `record()` inside the transaction of the action it records, so that an
action that rolls back leaves no entry, and one that commits always has its entry.

The actor and client address come from the request being served (`AuditMiddleware` keeps
it in a context variable, read when the entry is written, so that a DRF token, which is
authenticated inside the view, is seen too) or from `acting_as()` in commands and tasks.
Without either, the entry's actor is the portal itself."""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypedDict

from django.http import HttpRequest, HttpResponse

from audit.models import Action, Entry


@dataclass(frozen=True)
class Actor:
    user: Any  # a User, or None for the portal itself
    ip: str | None = None


class Where(TypedDict):
    """Whose entry it is: a team's (its admins read it), a collection's, a user's own."""

    team_id: int | None
    collection_id: int | None
    owner_id: int | None


_request: ContextVar[HttpRequest | None] = ContextVar("audit_request", default=None)
_actor: ContextVar[Actor | None] = ContextVar("audit_actor", default=None)


class AuditMiddleware:
    """Makes the request's user and address the actor of what the request records."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _request.set(request)
        try:
            return self.get_response(request)
        finally:
            _request.reset(token)


@contextlib.contextmanager
def acting_as(user: Any, ip: str | None = None) -> Iterator[None]:
    """Entries written inside are by `user` (a command run for someone, a websocket)."""
    token = _actor.set(Actor(user, ip))
    try:
        yield
    finally:
        _actor.reset(token)


def client_ip(request: HttpRequest) -> str | None:
    """The address the request came from, as the web server saw it (a proxy in front is
    trusted only through the server's own settings, e.g. daphne --proxy-headers)."""
    address = request.META.get("REMOTE_ADDR") or ""
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return None


def current_actor() -> Actor:
    actor = _actor.get()
    if actor is not None:
        return actor
    request = _request.get()
    if request is None:
        return Actor(None)
    user = getattr(request, "user", None)
    return Actor(user if user is not None and user.is_authenticated else None, client_ip(request))


def record(
    action: Action,
    obj: Any = None,
    *,
    object_type: str = "",
    object_id: object = "",
    label: str = "",
    team_id: int | None = None,
    collection_id: int | None = None,
    owner_id: int | None = None,
    changes: dict[str, tuple[Any, Any]] | None = None,
    actor: Any = None,
    ip: str | None = None,
) -> Entry:
    """One entry for `action` on `obj` (a model instance: its type, id and str() are taken)
    or on what `object_type`/`object_id`/`label` name. Call it inside the action's
    transaction. `actor`/`ip` override the current request's."""
    current = current_actor()
    user = actor if actor is not None else current.user
    if obj is not None:
        object_type = object_type or obj._meta.model_name
        object_id = object_id or obj.pk
        label = label or str(obj)
    return Entry.objects.create(
        actor=user,
        actor_label=(getattr(user, "email", "") or str(user))[:254] if user is not None else "",
        action=action,
        object_type=object_type,
        object_id=str(object_id or "")[:64],
        object_label=label[:300],
        team_id=team_id,
        collection_id=collection_id,
        owner_id=owner_id,
        changes={field: [before, after] for field, (before, after) in (changes or {}).items()},
        ip=ip or current.ip,
    )

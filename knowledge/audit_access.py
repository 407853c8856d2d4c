"""Who reads which audit entries, and the filters the audit page and API share.

The rule is in the SQL (`visible_entries`): a team's admins read the entries of the teams
they administer (`team_id`), everyone reads the entries about themselves (`owner_id`: their
personal collections, tokens, memory purges, logins). Superusers read every entry in the
Django admin (audit/admin.py); here they are users like any other."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from django import forms
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from audit.models import Action, Entry
from knowledge.models import Collection, Role, Team
from knowledge.principal import limited_collections

if TYPE_CHECKING:
    from portal.typing import AnyUser

# Ids are PostgreSQL bigints: a larger number is invalid input (a 400), not a database error.
MAX_ID = 2**63 - 1
DATE_FORMAT = "%Y-%m-%d"


def admin_teams(user: AnyUser) -> QuerySet[Team]:
    return Team.objects.with_role_at_least(user, Role.ADMIN)


def visible_entries(user: AnyUser) -> QuerySet[Entry]:
    """The entries `user` may read, newest first; for a token limited to some collections,
    only the entries about them (knowledge/principal.py)."""
    if not user.is_authenticated:
        return Entry.objects.none()
    entries = Entry.objects.filter(Q(team_id__in=admin_teams(user).values("pk")) | Q(owner_id=user.pk))
    allowed = limited_collections(user)
    if allowed is not None:
        entries = entries.filter(collection_id__in=allowed)
    return entries.order_by("-at", "-pk")


class AuditFilterForm(forms.Form):
    """The filters, from GET parameters (the page) or query parameters (the API). All are
    optional; `since` and `until` are days in the portal's time zone, both included."""

    team = forms.ModelChoiceField(
        label=_("Team"), queryset=Team.objects.none(), required=False, empty_label=_("All teams")
    )
    collection = forms.IntegerField(label=_("Collection"), required=False, min_value=1, max_value=MAX_ID)
    action = forms.ChoiceField(label=_("Action"), required=False)
    actor = forms.CharField(label=_("Actor's email contains"), required=False, max_length=254)
    since = forms.DateField(
        label=_("From"), required=False, input_formats=[DATE_FORMAT], widget=forms.DateInput(attrs={"type": "date"})
    )
    until = forms.DateField(
        label=_("To"), required=False, input_formats=[DATE_FORMAT], widget=forms.DateInput(attrs={"type": "date"})
    )

    def __init__(self, data: Any, *, user: AnyUser) -> None:
        super().__init__(data)
        team = self.fields["team"]
        assert isinstance(team, forms.ModelChoiceField)
        team.queryset = admin_teams(user).order_by("name")
        action = self.fields["action"]
        assert isinstance(action, forms.ChoiceField)
        action.choices = [("", _("All actions")), *Action.choices]
        # The collections whose entries the user reads; an id typed into the URL (a deleted
        # collection's, whose entries outlive it) is accepted too.
        collections = Collection.objects.manageable_by(user).select_related("owner_team").order_by("name", "pk")
        self.fields["collection"].widget = forms.Select(
            choices=[("", _("All collections")), *((c.pk, f"{c.name} ({c.owner_label})") for c in collections)]
        )

    def filter(self, entries: QuerySet[Entry]) -> QuerySet[Entry]:
        """`entries` narrowed by the valid filters (call after is_valid())."""
        data = self.cleaned_data
        if data.get("team") is not None:
            entries = entries.filter(team_id=data["team"].pk)
        if data.get("collection") is not None:
            entries = entries.filter(collection_id=data["collection"])
        if data.get("action"):
            entries = entries.filter(action=data["action"])
        if data.get("actor"):
            entries = entries.filter(actor_label__icontains=data["actor"])
        if data.get("since") is not None:
            entries = entries.filter(at__gte=_start_of(data["since"]))
        if data.get("until") is not None:
            entries = entries.filter(at__lt=_start_of(data["until"] + dt.timedelta(days=1)))
        return entries


def _start_of(day: dt.date) -> dt.datetime:
    return timezone.make_aware(dt.datetime.combine(day, dt.time.min))


def shown(value: Any) -> str:
    """A changed field's value as text: nothing is "—", lists and objects are JSON."""
    if value is None or value == "":
        return "—"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from knowledge.models import Role, Team


class CollectionForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=100)
    description = forms.CharField(label=_("Description"), required=False, widget=forms.Textarea(attrs={"rows": 2}))
    team = forms.ModelChoiceField(
        label=_("Owner"), queryset=Team.objects.none(), required=False, empty_label=_("Me (private)")
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Only teams where the user may create collections are offered.
        self.fields["team"].queryset = Team.objects.with_role_at_least(user, Role.EDITOR)  # type: ignore[attr-defined]


class RenameCollectionForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=100)
    description = forms.CharField(label=_("Description"), required=False, widget=forms.Textarea(attrs={"rows": 2}))


class TeamForm(forms.Form):
    name = forms.CharField(label=_("Team name"), max_length=100)


class AddMemberForm(forms.Form):
    email = forms.EmailField(label=_("Email"))
    role = forms.ChoiceField(label=_("Role"), choices=Role.choices, initial=Role.VIEWER)


class RoleForm(forms.Form):
    role = forms.ChoiceField(label=_("Role"), choices=Role.choices)


class TokenForm(forms.Form):
    name = forms.CharField(label=_("Token name"), max_length=100)

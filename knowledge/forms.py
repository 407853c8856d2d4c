from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from knowledge.models import Collection, Role, Team


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
    read_only = forms.BooleanField(
        label=_("Read only"), required=False, help_text=_("It can read, search and ask, but not change anything.")
    )
    collections = forms.ModelMultipleChoiceField(
        label=_("Only these collections"),
        queryset=Collection.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("None chosen: every collection you can see, now and later."),
    )

    def __init__(self, *args: Any, user: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["collections"]
        assert isinstance(field, forms.ModelMultipleChoiceField)
        field.queryset = Collection.objects.visible_to(user).order_by("name") if user is not None else field.queryset


class CollectionSettingsForm(forms.Form):
    """The options kept in Collection.settings: how pages are chunked (read by
    ingestion.index.chunk_settings), page summaries, and source weights by path (read by
    assistant.retrieval.search). Bounds match ingestion.chunking.ChunkSettings."""

    chunk_size = forms.IntegerField(label=_("Chunk size (characters)"), min_value=50, max_value=8000, initial=400)
    chunk_overlap = forms.IntegerField(label=_("Chunk overlap (characters)"), min_value=0, initial=50)
    page_summaries = forms.BooleanField(
        label=_("Write a short summary of each page with the chat model (slow)"), required=False
    )
    weights = forms.CharField(
        label=_("Source weights by path"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "core/** 1.0\nchat-logs/ 0.3"}),
        help_text=_(
            "One rule a line: a path pattern, a space, a weight from 0 to 1. The first matching rule counts; "
            "a pattern ending in / is a folder."
        ),
    )

    gate_points = forms.FloatField(
        label=_("Largest drop a new index version may show (points)"),
        min_value=0,
        max_value=100,
        required=False,
        help_text=_(
            "With golden questions, a newly built version flips only if none of hit@1, hit@5 and MRR falls by "
            "more than this many points; empty: the portal's default."
        ),
    )

    @classmethod
    def for_collection(cls, settings: dict[str, Any]) -> CollectionSettingsForm:
        rules = settings.get("weights") or []
        lines = [f"{rule.get('pattern', '')} {rule.get('weight', 1.0)}" for rule in rules if isinstance(rule, dict)]
        return cls(
            initial={
                "chunk_size": settings.get("chunk_size", 400),
                "chunk_overlap": settings.get("chunk_overlap", 50),
                "page_summaries": bool(settings.get("page_summaries", False)),
                "weights": "\n".join(lines),
                "gate_points": settings.get("gate_points"),
            }
        )

    def clean_weights(self) -> list[dict[str, object]]:
        rules: list[dict[str, object]] = []
        for number, line in enumerate(self.cleaned_data["weights"].splitlines(), start=1):
            if not line.strip():
                continue
            pattern, _space, weight = line.strip().rpartition(" ")
            try:
                value = float(weight)
            except ValueError:
                value = -1.0
            if not pattern.strip() or not 0 <= value <= 1:
                raise forms.ValidationError(
                    _("Line %(number)s: write a path pattern, a space and a weight from 0 to 1.") % {"number": number}
                )
            rules.append({"pattern": pattern.strip(), "weight": value})
        return rules

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        size, overlap = data.get("chunk_size"), data.get("chunk_overlap")
        if size is not None and overlap is not None and overlap >= size // 2:
            self.add_error("chunk_overlap", _("The overlap must be less than half the chunk size."))
        return data

    def settings(self, current: dict[str, Any]) -> dict[str, Any]:
        """The collection's settings with this form's values; other keys are kept."""
        data = self.cleaned_data
        updated = {
            **current,
            "chunk_size": data["chunk_size"],
            "chunk_overlap": data["chunk_overlap"],
            "page_summaries": data["page_summaries"],
            "weights": data["weights"],
            "gate_points": data["gate_points"],
        }
        if updated["gate_points"] is None:  # empty: the portal's default (PORTAL_GATE_POINTS)
            del updated["gate_points"]
        return updated

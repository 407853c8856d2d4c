from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from knowledge.models import Collection, IndexVersion


class VersionChoice(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return f"v{obj.number} ({obj.get_status_display()})"


class EvaluateForm(forms.Form):
    """Which kept version of the collection to evaluate, and whether to score answers too
    (each question then costs an answer by the chat model: minutes, not seconds)."""

    version = VersionChoice(queryset=IndexVersion.objects.none(), label=_("Index version"), empty_label=None)
    answers = forms.BooleanField(label=_("Also answer each question and score the answers (slow)"), required=False)

    def __init__(self, collection: Collection, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        kept = IndexVersion.objects.filter(collection=collection).exclude(status=IndexVersion.Status.FAILED)
        field = self.fields["version"]
        assert isinstance(field, VersionChoice)
        field.queryset = kept.order_by("-number")
        field.initial = collection.active_version_id

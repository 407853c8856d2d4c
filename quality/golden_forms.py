"""The form of a golden question added or edited by hand: the expected file is one of the
collection's documents, the page optional (any page of the file), the answer keys one a line
with alternative spellings separated by " | "."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from assistant.retrieval.evaluation import UNANSWERABLE
from knowledge.models import Collection, Document
from quality.golden import MAX_KEY, MAX_QUESTION
from quality.models import GoldenQuestion

ALTERNATIVES = "|"
LANGUAGE_CHOICES = [("", _("Detect")), ("en", _("English")), ("zh", _("Chinese"))]


class GoldenForm(forms.Form):
    question = forms.CharField(label=_("Question"), max_length=MAX_QUESTION, widget=forms.Textarea(attrs={"rows": 2}))
    lang = forms.ChoiceField(label=_("Language"), choices=LANGUAGE_CHOICES, required=False)
    kind = forms.ChoiceField(
        label=_("Kind"), choices=[(kind, label) for kind, label in GoldenQuestion.KINDS if kind != UNANSWERABLE]
    )
    file = forms.ChoiceField(label=_("Expected file"), required=False)
    page = forms.IntegerField(
        label=_("Page, slide or minute"),
        min_value=1,
        required=False,
        help_text=_("Empty: any page of the file."),
    )
    keys = forms.CharField(
        label=_("Answer keys"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "1.5\ncircle | point type 7"}),
        help_text=_("What a right answer must say: one a line; alternative spellings separated by “ | ”."),
    )
    abstain = forms.BooleanField(
        label=_("Should abstain: the collection does not answer this question"), required=False
    )
    key = forms.CharField(
        label=_("Id"), max_length=MAX_KEY, required=False, help_text=_("Empty: one is made up (q-1, q-2, …).")
    )

    def __init__(self, collection: Collection, *args: Any, golden: GoldenQuestion | None = None, **kwargs: Any) -> None:
        if golden is not None and "data" not in kwargs and not args:
            kwargs["initial"] = initial_of(golden)
        super().__init__(*args, **kwargs)
        self.golden = golden
        names = (
            Document.objects.filter(collection=collection).order_by("name").values_list("name", flat=True).distinct()
        )
        field = self.fields["file"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", "—"), *((name, name) for name in names)]
        # A file that has gone stays selectable, so that editing a stale question keeps it.
        first = (golden.gold[0].get("file") if golden and golden.gold else None) or ""
        if first and first not in names:
            field.choices = [*field.choices, (first, first)]

    def fields_of(self) -> dict[str, Any]:
        """The cleaned form as the fields of quality.actions.do_add_golden and do_update_golden."""
        data = self.cleaned_data
        abstain = data["abstain"]
        gold = []
        if not abstain and data["file"]:
            gold.append({"file": data["file"], "page": data["page"] or 0})
        if self.golden is not None and not abstain:  # the form edits the first expected page; the rest stay
            gold.extend(self.golden.gold[1:])
        return {
            "key": data["key"],
            "question": data["question"],
            "lang": data["lang"],
            "kind": UNANSWERABLE if abstain else data["kind"],
            "gold": gold,
            "keys": [] if abstain else parse_keys(data["keys"]),
        }


def parse_keys(text: str) -> list[str | list[str]]:
    keys: list[str | list[str]] = []
    for line in text.splitlines():
        spellings = [part.strip() for part in line.split(ALTERNATIVES) if part.strip()]
        if spellings:
            keys.append(spellings[0] if len(spellings) == 1 else spellings)
    return keys


def keys_text(keys: list[Any]) -> str:
    return "\n".join(key if isinstance(key, str) else f" {ALTERNATIVES} ".join(key) for key in keys)


def initial_of(golden: GoldenQuestion) -> dict[str, Any]:
    first = golden.gold[0] if golden.gold else {}
    return {
        "question": golden.question,
        "lang": golden.lang,
        "kind": "fact" if golden.should_abstain else golden.kind,
        "file": first.get("file", ""),
        "page": first.get("page") or None,
        "keys": keys_text(golden.keys),
        "abstain": golden.should_abstain,
        "key": golden.key,
    }

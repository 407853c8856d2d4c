"""The tab bar of a collection's pages: each tab shown only to those whose role opens it."""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from knowledge.access import collection_role
from knowledge.models import Collection, Role

register = template.Library()

# (name, URL name, label, the least role that opens the page), in the order shown.
TABS = (
    ("documents", "collection", _("Documents"), Role.VIEWER),
    ("sources", "collection-sources", _("Sources"), Role.ADMIN),
    ("quality", "collection-quality", _("Evaluations"), Role.VIEWER),
    ("golden", "collection-golden", _("Golden questions"), Role.VIEWER),
    ("feedback", "collection-feedback", _("Feedback"), Role.ADMIN),
    ("analytics", "collection-analytics", _("Analytics"), Role.ADMIN),
    ("settings", "collection-settings", _("Settings"), Role.EDITOR),
)


@register.inclusion_tag("knowledge/_tabs.html", takes_context=True)
def collection_tabs(context: dict[str, Any], collection: Collection, here: str) -> dict[str, Any]:
    """`here` names the tab shown; a page may pass its `role`, or it is looked up."""
    role = context.get("role")
    if not isinstance(role, Role):
        role = collection_role(context["request"].user, collection)
    tabs = [
        {"url": reverse(url_name, args=[collection.pk]), "label": label, "current": name == here}
        for name, url_name, label, least in TABS
        if role is not None and role.at_least(least)
    ]
    return {"tabs": tabs}

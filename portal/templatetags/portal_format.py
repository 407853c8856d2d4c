"""Numbers as people read them in the pages: `{% load portal_format %}`."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from django import template
from django.utils.formats import number_format
from django.utils.translation import gettext as _

register = template.Library()

# Below a second a time reads in milliseconds, up to a minute and a half in seconds, beyond in minutes.
SECONDS_FROM_MS = 1000
MINUTES_FROM_S = 90


@register.filter
def duration_ms(value: float | int | None) -> str:
    """A time in milliseconds as "850 ms", "3.5 s" or "2.4 min"; "—" when there is none."""
    if value is None or value == "":
        return "—"
    ms = float(value)
    if ms < SECONDS_FROM_MS:
        return _("%(count)s ms") % {"count": number_format(round(ms))}
    seconds = ms / 1000
    if seconds < MINUTES_FROM_S:
        return _("%(count)s s") % {"count": _tenths(seconds)}
    return _("%(count)s min") % {"count": _tenths(seconds / 60)}


def _tenths(value: float) -> str:
    """One decimal, rounded as people round (5.75 is 5.8), in the language's number format."""
    return number_format(Decimal(str(value)).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP), 1)

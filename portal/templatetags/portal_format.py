"""Numbers and text as people read them in the pages: `{% load portal_format %}`."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from django import template
from django.utils.formats import number_format
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _
from markdown_it import MarkdownIt

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


# CommonMark with its raw HTML off (markup in a document is shown as text, and links whose
# scheme is not a web one are left as text); pictures off, since a document's picture address
# would have the reader's browser fetch from anywhere. Tables on.
MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table").disable("image")


@register.filter
def markdown(text: str) -> SafeString:
    """A Markdown document's text as HTML, for reading: safe, as above."""
    return mark_safe(MARKDOWN.render(text or ""))  # noqa: S308 (raw HTML is off: every tag is markdown-it's own)

"""A link to a video kept elsewhere (ingestion.actions.do_add_video_link stores it as JSON):
its title, description and URL are what can be found, on one page that cites the URL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from django.utils.translation import gettext as _

from ingestion.parsers.base import Block, ParsedPage, ParseError, Parser
from ingestion.sniff import VIDEO_LINK

FIELDS = ("url", "title", "description")


class VideoLinkParser(Parser):
    mime_types = (VIDEO_LINK,)

    def pages(self, path: Path) -> Iterator[ParsedPage]:
        try:
            link = json.loads(path.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ParseError(_("The video link cannot be read (%(reason)s).") % {"reason": exc}) from exc
        url, title, description = (link.get(key) if isinstance(link, dict) else None for key in FIELDS)
        if not isinstance(url, str) or not url.strip() or not isinstance(title, str) or not title.strip():
            raise ParseError(_("The video link needs a URL and a title."))
        description = description.strip() if isinstance(description, str) else ""
        title, url = title.strip(), url.strip()
        blocks = [Block("heading", title, level=1)]
        if description:
            blocks.append(Block("text", description))
        blocks.append(Block("text", url))
        yield ParsedPage(number=1, kind="text_block", blocks=tuple(blocks), heading_path=(title,), meta={"url": url})

"""Links back from a document to the file at its source, for citations: the source's link
template (a Git host's page for a file, any web view) with {path} (the file's path from the
source's top, its folder in the source included, URL-quoted) and {branch}; a WebDAV file's
own URL where there is no template; nothing for a folder or bucket without one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from sources.models import Source, SourceFile
from sources.remotes.base import Location


def file_link(location: Location, path: str) -> str:
    full = "/".join(part for part in (location.prefix.strip("/"), path) if part)
    if location.link_template:
        return location.link_template.format(path=quote(full), branch=quote(location.branch))
    if location.kind == Source.Kind.WEBDAV and location.url:
        return location.url.rstrip("/") + "/" + quote(full)
    return ""


def source_of(document_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """For each document a source brought in: the source's name and kind, the file's path
    there and its link back (one query)."""
    found: dict[int, dict[str, Any]] = {}
    files = SourceFile.objects.filter(document_id__in=set(document_ids)).select_related("source")
    for file in files:
        source = file.source
        found[file.document_id] = {
            "name": source.name,
            "kind": source.kind,
            "path": file.path,
            "url": file_link(source.location(), file.path),
        }
    return found

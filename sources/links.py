"""Links back from a document to the file at its source, for citations: the source's link
template (a Git host's page for a file, any web view) with {path} (the file's path from the
source's top, its folder in the source included, URL-quoted) and {branch}; a WebDAV file's
own URL where there is no template; nothing for a folder or bucket without one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sources.models import SourceFile
from sources.remotes.base import file_link


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

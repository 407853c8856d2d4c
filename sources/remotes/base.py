"""What every kind of source offers the sync (sources/sync.py): a listing with the cheapest
change signal each protocol has, the content of one file, and a link back to it.

A remote never writes anything of the portal's; the sync compares, fetches and ingests.
Errors are of two sizes: `RemoteError` ends the run (wrong credentials, an unreachable host,
a bucket or branch that is not there), `FileError` skips one file with its reason. Both
carry a message a person can act on, with every credential already taken out."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import quote


@dataclass(frozen=True)
class Entry:
    """One file of the source, as listed.

    `path` is relative to the source's root (its folder, Git subpath, WebDAV folder or S3
    prefix), `/`-separated, as the remote spells it (not cleaned: the sync refuses `..` and
    over-long names itself). `signal` changes whenever the content may have changed, and
    costs nothing to read: size and mtime for a folder, the ETag (or size and last-modified
    when a server gives none) for WebDAV and S3, the blob id for Git. `content_id`, where
    the remote knows the content's own hash without fetching it (Git's blob id), lets a
    rename be recognised without fetching. `problem`, when set, is why this entry cannot be
    synced (a Git submodule, a symlink leaving the folder): it becomes a per-file error."""

    path: str
    signal: str
    size: int | None = None
    content_id: str = ""
    problem: str = ""


class RemoteError(Exception):
    """The whole run cannot go on; the message is readable and holds no secret."""


class FileError(Exception):
    """This one file cannot be read; the message is readable and holds no secret."""


class Remote(Protocol):
    def entries(self) -> Iterator[Entry]:
        """Every file under the root, include/exclude globs not applied yet (the sync does
        that). Raises RemoteError when the source cannot be listed at all."""
        ...

    def fetch(self, entry: Entry, destination: Path) -> None:
        """Write the file's current content to `destination` (streamed, never whole in
        memory). Raises FileError for this file alone, RemoteError when the source is gone
        (the bucket vanished, the host went away): the run then stops."""
        ...

    def link(self, path: str) -> str:
        """Where a person can open this file at its source ("" when the source has no such
        page): the source's link template with {path} (and {branch}), or the WebDAV URL."""
        ...

    def close(self) -> None:
        """Free what listing and fetching held (connections, temporary checkouts)."""
        ...


@dataclass
class Credentials:
    """What a source logs in with. `username`/`password` for Git over HTTPS and WebDAV,
    `username` as the access key id and `password` as the secret key for S3. Every value
    is a secret to take out of messages (`secrets()`)."""

    username: str = ""
    password: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    def secrets(self) -> tuple[str, ...]:
        return tuple(v for v in (self.password, *self.extra.values()) if v)


@dataclass(frozen=True)
class Location:
    """Where a source is, as its owner configured it (the Source model's fields, without
    Django): `url` is the folder's path, the Git repository's URL (https://, http://, or a
    path on this server under PORTAL_SOURCE_ROOTS), the WebDAV folder's URL or the S3
    endpoint's URL (empty for AWS itself). `prefix` is a folder inside it (Git subpath, S3
    key prefix, a sub-folder for the others). `workdir` is a folder the remote may keep
    between runs (the Git clone), on this machine."""

    kind: str
    url: str
    branch: str = ""
    prefix: str = ""
    bucket: str = ""
    region: str = ""
    link_template: str = ""
    workdir: Path | None = None

    @property
    def on_this_server(self) -> bool:
        """Read from this machine's disk, never over the network: a folder, or a Git repository
        given as a path or a file:// URL (both must lie under PORTAL_SOURCE_ROOTS)."""
        url = self.url.strip()
        return self.kind == "folder" or (self.kind == "git" and ("://" not in url or url[:5].lower() == "file:"))


def fill_link_template(template: str, path: str, branch: str = "") -> str:
    """The template with {path} (percent-encoded, `/` kept) and {branch} filled in; any other
    braces are left as they are rather than failing (str.format would raise on them)."""
    return template.replace("{path}", quote(path, safe="/")).replace("{branch}", quote(branch, safe="/"))


def join_prefix(prefix: str, path: str) -> str:
    """The path from the top of the source: the prefix folder, then the path under it."""
    prefix = prefix.strip("/")
    return f"{prefix}/{path}" if prefix else path


def file_link(location: Location, path: str, branch: str | None = None) -> str:
    """Where a person opens the file at its source: the link template filled in, else a
    WebDAV file's own URL, else "" (a folder or bucket without a template)."""
    full = join_prefix(location.prefix, path)
    if location.link_template:
        return fill_link_template(location.link_template, full, location.branch if branch is None else branch)
    if location.kind == "webdav" and location.url:
        return location.url.rstrip("/") + "/" + quote(full, safe="/")
    return ""

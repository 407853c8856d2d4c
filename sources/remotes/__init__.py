"""The kinds of source, one module each; `open_remote` picks one."""

from __future__ import annotations

from sources.remotes.base import Credentials, Entry, FileError, Location, Remote, RemoteError

__all__ = ["Credentials", "Entry", "FileError", "Location", "Remote", "RemoteError", "open_remote"]


def open_remote(location: Location, credentials: Credentials) -> Remote:
    """The remote for the location's kind, ready to list (nothing is contacted yet)."""
    if location.kind == "folder":
        from sources.remotes.folder import FolderRemote

        return FolderRemote(location, credentials)
    if location.kind == "git":
        from sources.remotes.git import GitRemote

        return GitRemote(location, credentials)
    if location.kind == "webdav":
        from sources.remotes.webdav import WebDavRemote

        return WebDavRemote(location, credentials)
    if location.kind == "s3":
        from sources.remotes.s3 import S3Remote

        return S3Remote(location, credentials)
    raise RemoteError(f"Unknown kind of source: {location.kind!r}")

"""A folder on the server (a mounted share, an export another system writes): listed with
each file's size and modification time, the cheapest signal a file system has. Only folders
under PORTAL_SOURCE_ROOTS may be synced: a collection admin must not be able to read the
server's own files."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.utils.translation import gettext as _

from sources.remotes.base import Credentials, Entry, FileError, Location, RemoteError, file_link


def check_local_path(url: str) -> Path:
    """The path, resolved, when it lies under one of PORTAL_SOURCE_ROOTS; RemoteError otherwise."""
    if not settings.SOURCE_ROOTS:
        raise RemoteError(
            _("Folders on the server can be synced only under PORTAL_SOURCE_ROOTS, and that setting is empty.")
        )
    path = Path(url.removeprefix("file://")).expanduser()
    if not path.is_absolute():
        raise RemoteError(_("“%(path)s” is not an absolute path.") % {"path": url})
    resolved = path.resolve()
    for root in settings.SOURCE_ROOTS:
        if resolved == Path(root).resolve() or resolved.is_relative_to(Path(root).resolve()):
            return resolved
    # The allowed folders are the server's business: not listed to collection admins.
    raise RemoteError(_("“%(path)s” is not under a folder that PORTAL_SOURCE_ROOTS allows.") % {"path": url})


class FolderRemote:
    def __init__(self, location: Location, credentials: Credentials) -> None:
        self.location = location
        self._root: Path | None = None

    @property
    def root(self) -> Path:
        if self._root is None:
            root = check_local_path(self.location.url)
            if self.location.prefix.strip("/"):
                root = root / self.location.prefix.strip("/")
            if not root.is_dir():
                raise RemoteError(_("The folder “%(path)s” does not exist on the server.") % {"path": root})
            self._root = root
        return self._root

    def entries(self) -> Iterator[Entry]:
        root = self.root
        try:
            yield from self._walk(root, root.resolve())
        except OSError as exc:
            raise RemoteError(_("The folder could not be read: %(error)s") % {"error": exc.strerror or exc}) from None

    def _walk(self, folder: Path, real_root: Path) -> Iterator[Entry]:
        # os.scandir gives the stat of each entry without another system call (one per file
        # would be a thousand for a thousand files).
        with os.scandir(folder) as found:
            items = sorted(found, key=lambda item: item.name)
        for item in items:
            if item.name.startswith("."):
                continue  # .git, .DS_Store, editors' temporary files
            path = Path(item.path)
            rel = path.relative_to(self.root).as_posix()
            if item.is_symlink():
                target = path.resolve()
                if not target.is_relative_to(real_root):
                    yield Entry(rel, "", problem=_("a link to somewhere outside the folder: not synced"))
                    continue
            if item.is_dir():
                yield from self._walk(path, real_root)
            elif item.is_file():
                stat = item.stat()
                yield Entry(rel, f"{stat.st_size}:{stat.st_mtime_ns}", size=stat.st_size)

    def fetch(self, entry: Entry, destination: Path) -> None:
        try:
            with (self.root / entry.path).open("rb") as source, destination.open("wb") as copy:
                shutil.copyfileobj(source, copy, 1024 * 1024)
        except FileNotFoundError:
            raise FileError(_("it was removed from the folder during the sync")) from None
        except OSError as exc:
            raise FileError(str(exc.strerror or exc)) from None

    def open_local(self, entry: Entry) -> Path:
        """The file itself: a folder needs no copy before it is hashed and stored."""
        return self.root / entry.path

    def link(self, path: str) -> str:
        return file_link(self.location, path)

    def close(self) -> None:
        pass

"""A folder on the server (a mounted share, an export another system writes): listed with
each file's size and modification time, the cheapest signal a file system has. Only folders
under PORTAL_SOURCE_ROOTS may be synced: a collection admin must not be able to read the
server's own files.

Links are where that could leak, so every path is resolved before it is used: the address
with its folder in the source (a prefix naming a link to elsewhere fails the run), each
entry while walking (a link leaving the source's folder or the roots is skipped, with the
reason in the run), and each file again when it is read, opened one part at a time without
following links, so that a link swapped in after the listing is not followed."""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

from django.conf import settings
from django.utils.translation import gettext as _

from sources.remotes.base import Credentials, Entry, FileError, Location, RemoteError, file_link

NO_FOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


def check_local_path(url: str) -> Path:
    """The path (or file:// URL), resolved, when it lies under one of PORTAL_SOURCE_ROOTS;
    RemoteError otherwise."""
    if not settings.SOURCE_ROOTS:
        raise RemoteError(
            _("Folders on the server can be synced only under PORTAL_SOURCE_ROOTS, and that setting is empty.")
        )
    if url[:5].lower() == "file:":
        parts = urlsplit(url)
        if parts.netloc.lower() not in ("", "localhost"):
            raise RemoteError(_("A file:// address names a folder on this server: file:///path/to/repository."))
        url = unquote(parts.path)
    try:
        path = Path(url).expanduser()
        resolved = path.resolve()
    except (ValueError, RuntimeError, OSError):  # a NUL byte, an unknown ~user, a link loop
        raise RemoteError(_("“%(path)s” is not a path this server can read.") % {"path": url}) from None
    if not path.is_absolute():
        raise RemoteError(_("“%(path)s” is not an absolute path.") % {"path": url})
    if within_roots(resolved):
        return resolved
    # The allowed folders are the server's business: not listed to collection admins.
    raise RemoteError(_("“%(path)s” is not under a folder that PORTAL_SOURCE_ROOTS allows.") % {"path": url})


def within_roots(real: Path) -> bool:
    """Whether a resolved path is one of PORTAL_SOURCE_ROOTS or under one."""
    return any(real.is_relative_to(Path(root).resolve()) for root in settings.SOURCE_ROOTS)


def open_resolved(real: Path, *, directory: bool = False) -> int:
    """A file descriptor of `real`, a path already resolved and checked, opened one part at
    a time from "/" without following a link: a part that became a link since it was
    resolved fails with OSError (ELOOP or ENOTDIR) instead of leading elsewhere. The last
    part is opened non-blocking, so that a FIFO swapped in does not hang the sync."""
    fd = os.open("/", NO_FOLLOW | os.O_DIRECTORY)
    try:
        parts = real.parts[1:]
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            flags = NO_FOLLOW | (os.O_DIRECTORY if directory or not last else os.O_NONBLOCK)
            inner = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


class FolderRemote:
    def __init__(self, location: Location, credentials: Credentials) -> None:
        self.location = location
        self._root: Path | None = None

    @property
    def root(self) -> Path:
        """The folder synced, resolved: the address and the folder in the source, with every
        link followed and the result under PORTAL_SOURCE_ROOTS."""
        if self._root is None:
            root = check_local_path(self.location.url)
            prefix = self.location.prefix.strip("/")
            if prefix:
                try:
                    root = check_local_path(str(root / prefix))
                except RemoteError:
                    raise RemoteError(
                        _(
                            "The folder in the source “%(prefix)s” leads outside the folders PORTAL_SOURCE_ROOTS "
                            "allows (through a link): nothing was synced."
                        )
                        % {"prefix": prefix}
                    ) from None
            if not root.is_dir():
                raise RemoteError(_("The folder “%(path)s” does not exist on the server.") % {"path": root})
            self._root = root
        return self._root

    def entries(self) -> Iterator[Entry]:
        root = self.root
        try:
            yield from self._walk(root, "", (root,))
        except OSError as exc:
            raise RemoteError(_("The folder could not be read: %(error)s") % {"error": exc.strerror or exc}) from None

    def _walk(self, folder: Path, rel_folder: str, above: tuple[Path, ...]) -> Iterator[Entry]:
        """The entries of `folder` (a resolved path inside the root), `rel_folder` being how
        the source names it. The folder is opened without following links, so one swapped in
        since it was resolved fails here rather than being listed."""
        # os.scandir gives the stat of each entry without another system call (one per file
        # would be a thousand for a thousand files).
        try:
            fd = open_resolved(folder, directory=True)
        except OSError as exc:
            if not rel_folder or exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            yield Entry(rel_folder.rstrip("/"), "", problem=_("it was replaced by a link during the sync: not synced"))
            return
        try:
            with os.scandir(fd) as found:
                items = sorted(found, key=lambda item: item.name)
            for item in items:
                if item.name.startswith("."):
                    continue  # .git, .DS_Store, editors' temporary files
                rel, real = rel_folder + item.name, folder / item.name
                if item.is_symlink():
                    real = real.resolve()
                    problem = self._leaves(real, above)
                    if problem:
                        yield Entry(rel, "", problem=problem)
                        continue
                if item.is_dir():
                    yield from self._walk(real, rel + "/", (*above, real))
                elif item.is_file():
                    info = item.stat()
                    yield Entry(rel, f"{info.st_size}:{info.st_mtime_ns}", size=info.st_size)
        finally:
            os.close(fd)

    def _leaves(self, real: Path, above: tuple[Path, ...]) -> str:
        """Why a link's resolved target is not synced ("" when it may be)."""
        if not within_roots(real):
            return _("a link to somewhere outside the folders PORTAL_SOURCE_ROOTS allows: not synced")
        if not real.is_relative_to(self.root):
            return _("a link to somewhere outside the folder: not synced")
        if real in above:
            return _("a link to a folder that holds it: not synced")
        return ""

    def fetch(self, entry: Entry, destination: Path) -> None:
        """A copy of the file, resolved and checked again, then opened without following any
        link: a link swapped in since the listing is refused, never read."""
        real = (self.root / entry.path).resolve()
        if not real.is_relative_to(self.root) or not within_roots(real):
            raise FileError(_("it became a link to somewhere outside the folder during the sync: not synced"))
        try:
            fd = open_resolved(real)
        except FileNotFoundError:
            raise FileError(_("it was removed from the folder during the sync")) from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise FileError(_("it was replaced by a link during the sync: not synced")) from None
            raise FileError(str(exc.strerror or exc)) from None
        try:
            with os.fdopen(fd, "rb") as source:
                if not stat.S_ISREG(os.fstat(source.fileno()).st_mode):
                    raise FileError(_("it is no longer a plain file"))
                with destination.open("wb") as copy:
                    shutil.copyfileobj(source, copy, 1024 * 1024)
        except OSError as exc:
            raise FileError(str(exc.strerror or exc)) from None

    def link(self, path: str) -> str:
        return file_link(self.location, path)

    def close(self) -> None:
        pass

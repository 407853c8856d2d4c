"""A WebDAV share (Nextcloud, ownCloud, SharePoint, a NAS, Apache mod_dav), through webdav4.

Folders are listed one level at a time (PROPFIND with Depth: 1): many servers refuse
Depth: infinity, and one level at a time never asks a server for an unbounded answer. The
ETag is the change signal; a server without ETags gives size and last-modified instead.
Contents are streamed with a plain GET, straight to the destination.

URLs are built here, percent-encoding each path (webdav4's own path joining refuses names
with "#" or "?", which people do give files); webdav4 gives the authenticated HTTP client and
parses the multistatus answers.

Every connection goes through common.outbound's Connector: the server's name is resolved
once and checked, connections go only to that address, and redirects are not followed (a
server that answers one is told apart from one that refuses)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from django.utils.translation import gettext as _
from webdav4.client import Client
from webdav4.multistatus import parse_multistatus_response

from common.outbound import Connector, OutboundError
from portal.redact import scrub
from sources.remotes.base import Credentials, Entry, FileError, Location, RemoteError, file_link, join_prefix

TIMEOUT = httpx.Timeout(60.0, connect=10.0)  # a dead host fails in seconds, a slow answer may take a minute
CHUNK = 1024 * 1024


class WebDavRemote:
    def __init__(self, location: Location, credentials: Credentials) -> None:
        self.location = location
        self.credentials = credentials
        self.prefix = location.prefix.strip("/")
        url = location.url.strip()
        if not url.startswith(("https://", "http://")):
            raise RemoteError(_("A WebDAV address starts with https:// or http://."))
        auth = (credentials.username, credentials.password) if credentials.username or credentials.password else None
        self.base = url.rstrip("/") + "/"  # the share's URL, percent-encoded, ending in "/"
        self.client = Client(self.base, auth=auth, timeout=TIMEOUT, **Connector().http_options())
        self.host = self.client.base_url.host or url

    # -- what the sync calls -----------------------------------------------------------------

    def entries(self) -> Iterator[Entry]:
        root = self._absolute(self.prefix)
        pending: deque[str] = deque([self.prefix])
        seen: set[str] = set()
        while pending:
            folder = pending.popleft()
            if folder in seen:
                continue
            seen.add(folder)
            for response in self._propfind(folder, is_root=folder == self.prefix):
                path = response.path_norm
                if path == self._absolute(folder) or not path.startswith(root.rstrip("/") + "/"):
                    continue  # the folder itself, or something the server put outside it
                relative = path[len(root.rstrip("/")) + 1 :]
                if response.properties.collection:
                    pending.append(join_prefix(self.prefix, relative))
                else:
                    yield self._entry(relative, response.properties)

    def fetch(self, entry: Entry, destination: Path) -> None:
        url = self._url(entry.path)
        try:
            with self.client.http.stream("GET", url) as response:
                self._check_fetch(response)
                with destination.open("wb") as out:
                    for chunk in response.iter_bytes(CHUNK):
                        out.write(chunk)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        except OutboundError as exc:
            raise RemoteError(str(exc)) from None

    def link(self, path: str) -> str:
        return file_link(self.location, path)

    def close(self) -> None:
        self.client.http.close()

    # -- listing -----------------------------------------------------------------------------

    def _propfind(self, folder: str, is_root: bool) -> list[Any]:
        try:
            response = self.client.http.request("PROPFIND", self._folder_url(folder), headers={"Depth": "1"})
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        except OutboundError as exc:
            raise RemoteError(str(exc)) from None
        if response.is_redirect:
            raise RemoteError(
                _(
                    "%(host)s redirected the folder “%(folder)s” to %(location)s; redirects are not followed: "
                    "give the source the address it redirects to."
                )
                % {"host": self.host, "folder": folder or "/", "location": self._location(response)}
            )
        if response.status_code == 404:
            if is_root:
                raise RemoteError(
                    _("The folder “%(folder)s” does not exist on the WebDAV server.") % {"folder": folder or "/"}
                )
            return []  # removed while the listing went on: its files are gone too
        if response.status_code < 300 and response.status_code != 207:
            raise RemoteError(
                _("%(host)s did not answer as a WebDAV server does: %(error)s")
                % {"host": self.host, "error": _("a plain page instead of a folder listing")}
            )
        if response.status_code != 207:
            raise self._refused(response.status_code, folder)
        try:
            result = parse_multistatus_response(response)
        except Exception as exc:  # an answer that is no WebDAV multistatus (an HTML page, a proxy's error)
            raise RemoteError(
                _("%(host)s did not answer as a WebDAV server does: %(error)s")
                % {"host": self.host, "error": self._scrub(str(exc) or type(exc).__name__)}
            ) from None
        return list(result.responses.values())

    @staticmethod
    def _entry(path: str, properties: Any) -> Entry:
        size = properties.content_length
        etag = (properties.etag or "").strip()
        if etag:
            signal = etag
        else:
            modified = properties.modified.isoformat() if properties.modified else ""
            signal = f"{size if size is not None else ''}:{modified}"
        return Entry(path, signal, size=size)

    # -- fetching ----------------------------------------------------------------------------

    def _check_fetch(self, response: httpx.Response) -> None:
        status = response.status_code
        if status < 300:
            return
        if status == 404:
            raise FileError(_("it was removed from the share since the listing"))
        if response.is_redirect:
            raise FileError(
                _("the WebDAV server redirected it to %(location)s; redirects are not followed")
                % {"location": self._location(response)}
            )
        if status == 401:
            raise self._refused(status, "")
        raise FileError(_("the WebDAV server answered %(status)s") % {"status": f"{status} {response.reason_phrase}"})

    # -- URLs and messages -------------------------------------------------------------------

    def _absolute(self, folder: str) -> str:
        """The folder's path on the server (decoded, no trailing slash), as responses spell it."""
        return self._folder_url(folder).path.rstrip("/") or "/"

    def _folder_url(self, folder: str) -> httpx.URL:
        """A folder's URL (`folder` from the share's top), ending in "/" as collections do."""
        folder = folder.strip("/")
        return httpx.URL(self.base + (quote(folder, safe="/") + "/" if folder else ""))

    def _url(self, path: str) -> httpx.URL:
        return httpx.URL(self.base + quote(join_prefix(self.prefix, path), safe="/"))

    def _scrub(self, text: str) -> str:
        return scrub(text, *self.credentials.secrets())

    def _location(self, response: httpx.Response) -> str:
        """Where a redirect points, with any user name or password taken out."""
        try:
            target = response.url.join(response.headers.get("Location", "")).copy_with(username=None, password=None)
        except (httpx.InvalidURL, ValueError):
            return _("an address that cannot be read")
        return self._scrub(str(target))

    def _refused(self, status: int, folder: str) -> RemoteError:
        if status == 401:
            if not self.credentials.username and not self.credentials.password:
                return RemoteError(_("The WebDAV server asks for a user name and password."))
            return RemoteError(_("The WebDAV server refused the user name or password."))
        if status == 403:
            return RemoteError(
                _("The WebDAV server refused access to the folder “%(folder)s”.") % {"folder": folder or "/"}
            )
        return RemoteError(
            _("The WebDAV server answered %(status)s for the folder “%(folder)s”.")
            % {"status": status, "folder": folder or "/"}
        )

    def _unreachable(self, exc: httpx.TransportError) -> RemoteError:
        text = str(exc).lower()
        if isinstance(exc, httpx.ConnectTimeout):
            reason = _("the connection timed out")
        elif isinstance(exc, httpx.TimeoutException):
            return RemoteError(_("%(host)s did not answer in time.") % {"host": self.host})
        elif "refused" in text:
            reason = _("connection refused")
        elif "name or service not known" in text or "nodename nor servname" in text or "no address" in text:
            reason = _("the name does not resolve")
        elif "certificate" in text or "ssl" in text:
            reason = _("its certificate is not trusted")
        else:
            reason = self._scrub(str(exc) or type(exc).__name__)
        return RemoteError(_("Could not reach %(host)s: %(reason)s.") % {"host": self.host, "reason": reason})

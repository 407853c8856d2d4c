"""Which hosts a source may reach: the portal's one outbound policy (common/outbound.py), in the
words of a source. A form checks an address when the source is saved; the remotes connect
through a `Connector`, which checks again what each name resolves to and connects only there."""

from __future__ import annotations

from urllib.parse import urlsplit

from common.outbound import OutboundError, Policy
from sources.remotes.base import Location, RemoteError


def remote_host(location: Location) -> str | None:
    """The host a source connects to; None for a folder, a Git repository on this server (a
    path or a file:// URL) and AWS itself (an S3 source with no endpoint)."""
    url = location.url.strip()
    if location.on_this_server:
        return None
    if location.kind == "s3" and not url:
        return None
    return urlsplit(url).hostname or ""


def check_host(location: Location, *, resolve: bool = True) -> None:
    """RemoteError when the location's host may not be reached (nothing for a local path).
    `resolve=False` (saving a source) judges an address written as such (in any spelling:
    "0x7f.1" is 127.0.0.1) and a name by its name, leaving what it resolves to for the sync,
    which checks every connection: a host that this server cannot resolve yet may be saved."""
    host = remote_host(location)
    if host is None:
        return
    try:
        Policy.from_settings().check(host, resolve_name=resolve)
    except OutboundError as exc:
        raise RemoteError(str(exc)) from None

"""Which hosts a source may reach. Sources are added by collection admins, and anyone may own
a personal collection: a source's address must not become a way into the portal's own
machine or the cloud's metadata service (SSRF). Addresses that resolve to loopback,
link-local (169.254.169.254 and its like), multicast or unspecified addresses are refused
unless their host is listed in PORTAL_SOURCE_HOSTS. Private networks (10/8, 192.168/16, …)
are allowed: that is where a team's NAS, Nextcloud or MinIO usually lives. With
PORTAL_SOURCE_HOSTS set, only the hosts it lists may be reached at all."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings
from django.utils.translation import gettext as _

from sources.remotes.base import Location, RemoteError


def check_host(location: Location, *, resolve: bool = True) -> None:
    """RemoteError when the location's host may not be reached (nothing for a local path).
    `resolve=False` (saving a source) judges an address written as such and leaves names to
    the sync, which resolves them: a host that this server cannot resolve yet may be saved."""
    if location.kind == "folder" or (location.kind == "git" and "://" not in location.url):
        return
    if location.kind == "s3" and not location.url:
        return  # AWS itself
    host = (urlsplit(location.url).hostname or "").lower()
    allowed = [h.lower() for h in settings.SOURCE_HOSTS]
    if allowed:
        if host not in allowed:
            raise RemoteError(_("The host “%(host)s” is not one that PORTAL_SOURCE_HOSTS allows.") % {"host": host})
        return
    if not resolve:
        try:
            addresses = {str(ipaddress.ip_address(host.strip("[]")))}
        except ValueError:
            addresses = {"127.0.0.1"} if host == "localhost" or host.endswith(".localhost") else set()
    else:
        try:
            addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
        except (socket.gaierror, UnicodeError):
            raise RemoteError(_("The host “%(host)s” could not be found.") % {"host": host}) from None
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%")[0])
        if ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_unspecified or ip.is_reserved:
            raise RemoteError(
                _(
                    "“%(host)s” is an address of this machine or its cloud's internal services; "
                    "an operator can allow it in PORTAL_SOURCE_HOSTS."
                )
                % {"host": host}
            )

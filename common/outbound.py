"""Connections to addresses that people type in: one policy for every remote a source reaches
(WebDAV through httpx, Git through the git CLI and curl, S3 through boto3) and for any later
fetch of a URL someone gave.

Anyone may own a personal collection and so add a source, so an address typed into the
portal must not become a way into the portal's own machine, the cloud's metadata service or,
where the operator says so, its neighbours on a private network (SSRF). Checking a name and
then letting a library connect is not enough: the library resolves the name again (a DNS
answer that changes in between gets through) and follows redirects anywhere. So here:

- a name is resolved once per `Connector` (one remote's run) by `resolve`, which is
  getaddrinfo and so reads "2130706433", "0x7f.1" or "017700000001" as curl and httpx would;
  **every** address it gives is checked, and connections go only to those addresses. TLS
  still checks the certificate against the name, which is also the SNI and the Host header;
- redirects are not followed (httpx `follow_redirects=False`, git `http.followRedirects=false`);
- proxies from the environment are not used: a proxy would resolve the name itself and reach
  an address that nobody checked.

Refused unless the host is listed by name in PORTAL_SOURCE_HOSTS: loopback, link-local,
unspecified ("this network", 0/8), multicast and reserved addresses, the same written inside
IPv6 (IPv4-mapped, IPv4-compatible, NAT64 64:ff9b::/96, 6to4 2002::/16), the clouds' metadata
services by address and by name, and "localhost". Private networks (10/8, 172.16/12,
192.168/16, 100.64/10, fc00::/7) are allowed unless PORTAL_SOURCE_PRIVATE_NETWORKS is false:
that is where a team's NAS, Nextcloud or MinIO usually lives. With PORTAL_SOURCE_HOSTS set,
only the hosts it lists may be reached at all."""

from __future__ import annotations

import contextlib
import enum
import ipaddress
import os
import re
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpcore
import httpx
import idna
from django.conf import settings
from django.utils.translation import gettext as _

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class OutboundError(Exception):
    """No connection was made: the host may not be reached, or its name does not resolve. The
    message is readable and names the host, never a credential."""


class Kind(enum.StrEnum):
    """What an address is, as far as the policy cares; a public address has none."""

    LOOPBACK = "loopback"
    LINK_LOCAL = "link-local"
    UNSPECIFIED = "unspecified"
    MULTICAST = "multicast"
    RESERVED = "reserved"
    METADATA = "metadata"
    PRIVATE = "private"

    def described(self) -> str:
        return {
            Kind.LOOPBACK: _("an address of this machine"),
            Kind.LINK_LOCAL: _("a link-local address"),
            Kind.UNSPECIFIED: _("an unspecified address"),
            Kind.MULTICAST: _("a multicast address"),
            Kind.RESERVED: _("a reserved address"),
            Kind.METADATA: _("a cloud metadata service"),
            Kind.PRIVATE: _("a private network address"),
        }[self]


# The metadata services that live at an ordinary-looking address (169.254.169.254 would be
# refused as link-local anyway; listed to be named for what it is).
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(address)
    for address in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean…
        "169.254.170.2",  # AWS ECS task credentials
        "169.254.170.23",  # AWS EKS Pod Identity
        "fd00:ec2::254",  # AWS over IPv6
        "fd00:ec2::23",  # AWS EKS Pod Identity over IPv6
        "fd20:ce::254",  # Google Compute Engine over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
        "168.63.129.16",  # Azure's WireServer (host agent: certificates, extension settings)
    )
)
METADATA_NAMES = frozenset(
    {"metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal"}
)


def _table(*rows: tuple[str, Kind]) -> tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, Kind], ...]:
    return tuple((ipaddress.ip_network(network), kind) for network, kind in rows)


# First match wins. Python's own is_private / is_reserved changed between 3.11 patch releases
# and differ for IPv4 written inside IPv6, so the ranges are spelled out here.
RANGES_V4 = _table(
    ("0.0.0.0/8", Kind.UNSPECIFIED),  # "this network": 0.0.0.0 reaches this machine on Linux
    ("127.0.0.0/8", Kind.LOOPBACK),
    ("169.254.0.0/16", Kind.LINK_LOCAL),
    ("224.0.0.0/4", Kind.MULTICAST),
    ("240.0.0.0/4", Kind.RESERVED),  # with 255.255.255.255
    ("192.0.0.0/24", Kind.RESERVED),  # IETF protocol assignments
    ("192.88.99.0/24", Kind.RESERVED),  # the old 6to4 relays
    ("10.0.0.0/8", Kind.PRIVATE),
    ("172.16.0.0/12", Kind.PRIVATE),
    ("192.168.0.0/16", Kind.PRIVATE),
    ("100.64.0.0/10", Kind.PRIVATE),  # carrier-grade NAT; also Tailscale's addresses
    ("198.18.0.0/15", Kind.PRIVATE),  # benchmarking networks
)
RANGES_V6 = _table(
    ("::/128", Kind.UNSPECIFIED),
    ("::1/128", Kind.LOOPBACK),
    ("::/96", Kind.RESERVED),  # IPv4-compatible addresses, deprecated
    ("64:ff9b:1::/48", Kind.RESERVED),  # local-use NAT64: where the IPv4 address sits is not known
    ("100::/64", Kind.RESERVED),  # discard-only
    ("2001::/32", Kind.RESERVED),  # Teredo
    ("fe80::/10", Kind.LINK_LOCAL),
    ("fec0::/10", Kind.RESERVED),  # site-local, deprecated
    ("ff00::/8", Kind.MULTICAST),
    ("fc00::/7", Kind.PRIVATE),
)
GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")  # outside it (and the rows above): unassigned
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")

# A host name as curl, httpx and urllib3 all read it the same way: ASCII letters, digits,
# "-" and "_", dot-separated. Anything else (percent-escapes, spaces) is refused rather than
# trusted to be read alike by each of them.
HOST_NAME = re.compile(r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*")


def classify(address: str | IPAddress) -> Kind | None:
    """What `address` is (None: a public address). IPv4 written inside IPv6 (mapped, NAT64,
    6to4) is what the IPv4 address is."""
    ip = ipaddress.ip_address(address.split("%", 1)[0]) if isinstance(address, str) else address
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
        ip = ipaddress.IPv6Address(int(ip))  # fe80::1%eth0: the zone does not change what it is
    if ip in METADATA_ADDRESSES:
        return Kind.METADATA
    if isinstance(ip, ipaddress.IPv4Address):
        return next((kind for network, kind in RANGES_V4 if ip in network), None)
    embedded = ip.ipv4_mapped or ip.sixtofour or (ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in NAT64 else None)
    if embedded is not None:
        return classify(embedded)
    found = next((kind for network, kind in RANGES_V6 if ip in network), None)
    if found is None and ip not in GLOBAL_UNICAST_V6:
        return Kind.RESERVED
    return found


def canonical_host(host: str) -> str:
    """The host as it is compared and resolved: no brackets, lower case, no trailing dot, an
    international name in its ASCII (IDNA) form as httpx writes it."""
    host = host.strip().strip("[]").lower().rstrip(".")
    if not host.isascii():
        with contextlib.suppress(idna.IDNAError, UnicodeError):  # else refused by check_name
            host = idna.encode(host).decode("ascii")
    return host


def literal_address(host: str) -> IPAddress | None:
    """The address `host` is written as, in any spelling getaddrinfo accepts ("127.1",
    "0x7f.1", "2130706433", "::ffff:127.0.0.1"); None for a name. Never asks DNS."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError, ValueError):
        return None
    return ipaddress.ip_address(str(infos[0][4][0]).split("%", 1)[0]) if infos else None


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, as a connection would use it. The one place the
    policy resolves names (tests replace it to answer for names of their own)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _refused(host: str, kind: Kind) -> OutboundError:
    return OutboundError(
        _("“%(host)s” is %(kind)s, which sources may not reach; an operator can allow the host in PORTAL_SOURCE_HOSTS.")
        % {"host": host, "kind": kind.described()}
    )


def _leads_to(host: str, kind: Kind) -> OutboundError:
    return OutboundError(
        _(
            "“%(host)s” leads to %(kind)s, which sources may not reach; an operator can allow the "
            "host in PORTAL_SOURCE_HOSTS."
        )
        % {"host": host, "kind": kind.described()}
    )


@dataclass(frozen=True)
class Policy:
    """Which hosts and addresses may be reached. `hosts`: names reachable at any address; when
    there are any, the only ones. `private_networks`: whether private ranges may be reached."""

    hosts: frozenset[str] = frozenset()
    private_networks: bool = True

    @classmethod
    def from_settings(cls) -> Policy:
        return cls(
            frozenset(canonical_host(host) for host in settings.SOURCE_HOSTS),
            bool(getattr(settings, "SOURCE_PRIVATE_NETWORKS", True)),
        )

    def allows(self, kind: Kind | None) -> bool:
        return kind is None or (kind is Kind.PRIVATE and self.private_networks)

    def check_name(self, host: str) -> bool:
        """Judge `host` (canonical) by its name alone: OutboundError when it may not be
        reached whatever it resolves to; True when it is listed (any address will do)."""
        if not HOST_NAME.fullmatch(host) and literal_address(host) is None:
            raise OutboundError(_("“%(host)s” is not a valid host name.") % {"host": host})
        if self.hosts:
            if host in self.hosts:
                return True
            raise OutboundError(_("The host “%(host)s” is not one that PORTAL_SOURCE_HOSTS allows.") % {"host": host})
        if host == "localhost" or host.endswith(".localhost"):
            raise _refused(host, Kind.LOOPBACK)
        if host in METADATA_NAMES:
            raise _refused(host, Kind.METADATA)
        return False

    def check_addresses(self, host: str, addresses: Iterable[str | IPAddress]) -> None:
        """OutboundError when any of the addresses `host` resolved to may not be reached."""
        literal = literal_address(host) is not None
        for address in addresses:
            kind = classify(address)
            if kind is not None and not self.allows(kind):
                raise _refused(host, kind) if literal else _leads_to(host, kind)

    def check(self, host: str, port: int = 0, *, resolve_name: bool = True) -> tuple[str, ...]:
        """The addresses `host` may be reached at, all of them checked; the whole check of one
        host. With `resolve_name` false (saving a source), an address written as such is
        judged and a name only by its name (no addresses then): a host this server cannot
        resolve yet may be saved, and each connection checks what it resolves to."""
        host = canonical_host(host)
        listed = self.check_name(host)
        literal = literal_address(host)
        if literal is None and not resolve_name:
            return ()
        found = [str(literal)] if literal is not None else _resolved(host, port)
        if not listed:
            self.check_addresses(host, found)
        return tuple(found)


def _resolved(host: str, port: int) -> list[str]:
    try:
        found = resolve(host, port)
    except (OSError, UnicodeError, ValueError):
        found = []
    if not found:
        raise OutboundError(_("The host “%(host)s” could not be found.") % {"host": host})
    return found


class Connector:
    """Connections for one remote's run: each name resolved once, every address checked, and
    connections made only to those addresses (a later, different DNS answer is never asked
    for). The helpers below put httpx, git and boto3 on it."""

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy if policy is not None else Policy.from_settings()
        self._answers: dict[str, tuple[str, ...] | str] = {}  # host -> addresses, or why refused
        self._lock = threading.Lock()

    def addresses(self, host: str, port: int) -> tuple[str, ...]:
        """The checked addresses of `host` (resolved on the first call only); OutboundError
        when it may not be reached or does not resolve."""
        host = canonical_host(host)
        with self._lock:
            if host not in self._answers:
                try:
                    self._answers[host] = self.policy.check(host, port)
                except OutboundError as exc:
                    self._answers[host] = str(exc)
            answer = self._answers[host]
        if isinstance(answer, str):
            raise OutboundError(answer)
        return answer

    def connect(self, host: str, port: int, timeout: float | None) -> socket.socket:
        """A TCP connection to one of the checked addresses of `host`, tried in order; the
        OSError of the last one when none answers."""
        error: OSError | None = None
        for address in self.addresses(host, port):
            try:
                return socket.create_connection((address, port), timeout)
            except OSError as exc:
                error = exc
        assert error is not None
        raise error

    # -- httpx ---------------------------------------------------------------------------------

    def http_options(self) -> dict[str, Any]:
        """Options for an httpx.Client (or webdav4's, which passes them on): every connection
        through this connector, no redirects followed, no proxy, .netrc or other settings
        of this machine's environment."""
        return {"transport": PinnedTransport(self), "trust_env": False, "follow_redirects": False}

    # -- git -----------------------------------------------------------------------------------

    def git_url_and_config(self, url: str) -> tuple[str, list[str]]:
        """The URL to give git (its host written as checked) and the `-c` options that keep git
        and curl to the checked addresses: curl's resolver answers from them
        (http.curloptResolve), redirects are not followed and no proxy is used."""
        parts = urlsplit(url)
        name, port = host_and_port(url)
        host = canonical_host(name)
        addresses = self.addresses(host, port)
        config = ["-c", "http.followRedirects=false", "-c", "http.proxy="]
        literal = literal_address(host)
        if literal is not None:  # curl connects to the address itself: write it as the one checked
            shown = f"[{literal}]" if literal.version == 6 else str(literal)
        else:
            shown = host
            pinned = ",".join(f"[{a}]" if ":" in a else a for a in addresses)
            config += ["-c", f"http.curloptResolve={host}:{port}:{pinned}"]
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = (f"{userinfo}@" if userinfo else "") + shown + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc)), config

    # -- boto3 ---------------------------------------------------------------------------------

    def pin_boto3(self, client: Any) -> Any:
        """Have a boto3 client send its requests over connections to checked addresses (the
        endpoint's name still the Host header and what TLS checks), with no proxy. Returns the
        HTTP session now used, to be closed with the client."""
        config = client.meta.config
        session = _pinned_boto_session(self)(
            verify=os.environ.get("AWS_CA_BUNDLE") or os.environ.get("REQUESTS_CA_BUNDLE") or True,
            proxies={},  # not the environment's: the proxy would resolve the name itself
            timeout=(config.connect_timeout, config.read_timeout),
            max_pool_connections=config.max_pool_connections,
        )

        # botocore's documented hook: a response returned by a before-send handler is used
        # instead of sending with the client's own session.
        def send(request: Any, **_kwargs: Any) -> Any:
            return session.send(request)

        client.meta.events.register_first("before-send", send)
        return session


class _PinnedBackend(httpcore.SyncBackend):
    """httpcore's network backend, connecting to the connector's checked addresses; TLS is
    started by httpcore afterwards with the URL's host as the server name."""

    def __init__(self, connector: Connector) -> None:
        self._connector = connector

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        error: Exception | None = None
        for address in self._connector.addresses(host, port):
            try:
                return super().connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None
        raise error


class PinnedTransport(httpx.HTTPTransport):
    """httpx's own transport with every TCP connection made through a Connector."""

    def __init__(self, connector: Connector, *, verify: bool | str = True, limits: httpx.Limits | None = None) -> None:
        super().__init__(verify=verify, trust_env=False)
        limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_PinnedBackend(connector),
        )


def _pinned_boto_session(connector: Connector) -> Callable[..., Any]:
    """botocore's URLLib3Session whose connection pools connect through `connector`."""
    from botocore.awsrequest import (
        AWSHTTPConnection,
        AWSHTTPConnectionPool,
        AWSHTTPSConnection,
        AWSHTTPSConnectionPool,
    )
    from botocore.httpsession import URLLib3Session
    from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

    def new_conn(conn: Any) -> socket.socket:
        # urllib3's HTTPConnection._new_conn, with the address chosen by the connector. An
        # OutboundError goes through urllib3 as it is; botocore wraps it in HTTPClientError.
        timeout = conn.timeout if isinstance(conn.timeout, int | float) else socket.getdefaulttimeout()
        try:
            sock = connector.connect(conn.host, conn.port, timeout)
        except TimeoutError as exc:
            raise ConnectTimeoutError(conn, f"Connection to {conn.host} timed out. (timeout={timeout})") from exc
        except OSError as exc:
            raise NewConnectionError(conn, f"Failed to establish a new connection: {exc}") from exc
        for option in conn.socket_options or ():
            sock.setsockopt(*option)
        return sock

    http = type("PinnedHTTPConnection", (AWSHTTPConnection,), {"_new_conn": new_conn})
    https = type("PinnedHTTPSConnection", (AWSHTTPSConnection,), {"_new_conn": new_conn})
    pools = {
        "http": type("PinnedHTTPConnectionPool", (AWSHTTPConnectionPool,), {"ConnectionCls": http}),
        "https": type("PinnedHTTPSConnectionPool", (AWSHTTPSConnectionPool,), {"ConnectionCls": https}),
    }

    class PinnedSession(URLLib3Session):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            # The pool manager was made with (and keeps) this very dict; proxy managers too.
            self._pool_classes_by_scheme.update(pools)
            self._manager.pool_classes_by_scheme = self._pool_classes_by_scheme

    return PinnedSession


def unwrap(exc: BaseException) -> OutboundError | None:
    """The OutboundError behind `exc`, if any: botocore wraps one raised while connecting in
    its HTTPClientError (`kwargs["error"]`)."""
    inner = exc if isinstance(exc, OutboundError) else getattr(exc, "kwargs", {}).get("error")
    return inner if isinstance(inner, OutboundError) else None


def host_and_port(url: str) -> tuple[str, int]:
    """The host and port a URL connects to (80 or 443 when it names none)."""
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)

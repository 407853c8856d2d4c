"""The outbound policy (common/outbound.py) that every remote of a source connects through.

Addresses are judged by classification alone: no test here connects anywhere but 127.0.0.0/8.
Names are answered by a stub of the policy's one resolver (`outbound.resolve`), which maps
them to loopback listeners; every other part is real: WebDAV (wsgidav), Git (git
http-backend) and S3 (moto) servers, a server that redirects, and a listener that counts the
connections it gets, which must stay at 0."""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from uuid import uuid4

import pytest

from common import outbound
from common.outbound import Connector, Kind, OutboundError, Policy, classify, literal_address
from sources.hosts import check_host
from sources.remotes.base import Credentials, Entry, FileError, Location, RemoteError
from sources.remotes.git import GitRemote
from sources.remotes.s3 import S3Remote
from sources.remotes.webdav import WebDavRemote
from tests.sources.servers import (
    PASSWORD,
    USERNAME,
    CountingListener,
    GitHttpServer,
    S3Server,
    WebDavServer,
    WsgiApp,
    certificate,
    counting_listener,
    git_http_server_fixture,  # noqa: F401 (the git_http_server fixture)
    make_git_repo,
    publish,
    redirect_app,
    s3_server_fixture,  # noqa: F401 (the s3_server fixture)
    serve_wsgi,
    webdav_app,
    webdav_server_fixture,  # noqa: F401 (the webdav_server fixture)
    write_files,
)

# -- the resolver stub ------------------------------------------------------------------------


class Resolver:
    """Stands in for `outbound.resolve`: answers for the test's own names (a list of answers:
    the first call gets the first, later calls the next, the last one repeating) and counts
    the calls; other names go to the system's resolver, or fail the test when `strict`."""

    def __init__(self, real: Callable[[str, int], list[str]]) -> None:
        self.real = real
        self.answers: dict[str, list[list[str]]] = {}
        self.calls: Counter[str] = Counter()
        self.strict = False

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls[host] += 1
        if host in self.answers:
            answers = self.answers[host]
            return answers[min(self.calls[host], len(answers)) - 1]
        assert not self.strict, f"{host} was resolved"
        return self.real(host, port)


@pytest.fixture
def resolver(monkeypatch) -> Resolver:
    stub = Resolver(outbound.resolve)
    monkeypatch.setattr(outbound, "resolve", stub)
    return stub


@pytest.fixture
def blocked() -> Iterator[CountingListener]:
    """A listener on 127.0.0.1 that nothing may reach: it counts the connections it accepts."""
    with counting_listener() as listener:
        yield listener


def port_of(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


# -- what an address is ---------------------------------------------------------------------

REFUSED = [
    ("127.0.0.1", Kind.LOOPBACK),
    ("127.255.255.254", Kind.LOOPBACK),
    ("::1", Kind.LOOPBACK),
    ("169.254.1.1", Kind.LINK_LOCAL),
    ("fe80::1", Kind.LINK_LOCAL),
    ("fe80::1%eth0", Kind.LINK_LOCAL),
    ("0.0.0.0", Kind.UNSPECIFIED),  # noqa: S104 (an address judged, not bound)
    ("0.1.2.3", Kind.UNSPECIFIED),
    ("::", Kind.UNSPECIFIED),
    ("224.0.0.1", Kind.MULTICAST),
    ("239.255.255.250", Kind.MULTICAST),
    ("ff02::1", Kind.MULTICAST),
    ("240.0.0.1", Kind.RESERVED),
    ("255.255.255.255", Kind.RESERVED),
    ("192.0.0.8", Kind.RESERVED),
    ("fec0::1", Kind.RESERVED),
    ("100::1", Kind.RESERVED),
    ("4000::1", Kind.RESERVED),
    # the metadata services
    ("169.254.169.254", Kind.METADATA),
    ("169.254.170.2", Kind.METADATA),
    ("fd00:ec2::254", Kind.METADATA),
    ("fd20:ce::254", Kind.METADATA),
    ("100.100.100.200", Kind.METADATA),
    ("192.0.0.192", Kind.METADATA),
    ("168.63.129.16", Kind.METADATA),
    # IPv4 written inside IPv6: mapped, NAT64, 6to4; IPv4-compatible, local NAT64, Teredo
    ("::ffff:127.0.0.1", Kind.LOOPBACK),
    ("::ffff:169.254.169.254", Kind.METADATA),
    ("::ffff:0.0.0.0", Kind.UNSPECIFIED),
    ("::ffff:224.0.0.1", Kind.MULTICAST),
    ("64:ff9b::127.0.0.1", Kind.LOOPBACK),
    ("64:ff9b::a9fe:a9fe", Kind.METADATA),
    ("64:ff9b::6464:64c8", Kind.METADATA),
    ("2002:7f00:1::", Kind.LOOPBACK),
    ("2002:a9fe:a9fe::1", Kind.METADATA),
    ("2002:a9fe:101::", Kind.LINK_LOCAL),
    ("::127.0.0.1", Kind.RESERVED),
    ("::169.254.169.254", Kind.RESERVED),
    ("64:ff9b:1::7f00:1", Kind.RESERVED),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", Kind.RESERVED),
]
PRIVATE = [
    "10.0.0.5",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.20",
    "100.64.0.1",
    "100.127.255.254",
    "198.18.0.1",
    "fc00::1",
    "fd12:3456::1",
    "fd00:ec2::1",
    "::ffff:10.0.0.5",
    "64:ff9b::a00:5",
    "2002:c0a8:114::1",
]
PUBLIC = [
    "93.184.215.14",
    "8.8.8.8",
    "172.32.0.1",
    "100.128.0.1",
    "169.255.0.1",
    "2606:4700:4700::1111",
    "2a00:1450:4001::1",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
    "2002:808:808::1",
]


@pytest.mark.parametrize(("address", "kind"), REFUSED)
def test_it_refuses_every_blocked_form_private_networks_or_not(address: str, kind: Kind):
    assert classify(address) is kind
    assert not Policy().allows(classify(address))
    assert not Policy(private_networks=False).allows(classify(address))
    with pytest.raises(OutboundError, match="PORTAL_SOURCE_HOSTS"):
        Policy().check_addresses("files.example.com", [address])


@pytest.mark.parametrize("address", PRIVATE)
def test_it_allows_private_networks_unless_told_not_to(address: str):
    assert classify(address) is Kind.PRIVATE
    Policy().check_addresses("nas.example.com", [address])
    with pytest.raises(OutboundError, match="a private network address"):
        Policy(private_networks=False).check_addresses("nas.example.com", [address])


@pytest.mark.parametrize("address", PUBLIC)
def test_it_allows_public_addresses(address: str):
    assert classify(address) is None
    Policy(private_networks=False).check_addresses("files.example.com", [address])
    assert classify(ipaddress.ip_address(address)) is None


LITERALS = {
    "127.1": "127.0.0.1",
    "127.0.1": "127.0.0.1",
    "2130706433": "127.0.0.1",
    "0x7f000001": "127.0.0.1",
    "0x7f.1": "127.0.0.1",
    "0x7f.0.0.1": "127.0.0.1",
    "017700000001": "127.0.0.1",
    "0177.0.0.1": "127.0.0.1",
    "2852039166": "169.254.169.254",
    "0xa9fea9fe": "169.254.169.254",
    "169.254.43518": "169.254.169.254",
    "0": "0.0.0.0",  # noqa: S104
    "::ffff:7f00:1": "::ffff:127.0.0.1",
}


@pytest.mark.parametrize(("spelling", "address"), LITERALS.items())
def test_it_reads_every_spelling_of_an_address_as_curl_and_httpx_do(spelling: str, address: str, resolver: Resolver):
    resolver.strict = True  # a literal is never looked up
    assert literal_address(spelling) == ipaddress.ip_address(address)
    with pytest.raises(OutboundError, match="PORTAL_SOURCE_HOSTS"):
        Policy().check(spelling)
    with pytest.raises(OutboundError, match="PORTAL_SOURCE_HOSTS"):
        Connector(Policy()).addresses(spelling, 80)


# The literal forms an address is refused in when a source is saved, before any sync.
LITERAL_URLS = [
    "http://127.0.0.1/",
    "http://127.1:8080/",
    "http://2130706433/",
    "http://0x7f.1/",
    "http://017700000001/",
    "http://0x7f000001/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[2002:7f00:1::]/",
    "http://[::127.0.0.1]/",
    "http://0.0.0.0:6379/",
    "http://[::]/",
    "http://169.254.169.254/latest/meta-data/",
    "http://2852039166/latest/",
    "http://[fd00:ec2::254]/latest/",
    "http://100.100.100.200/latest/meta-data/",
    "http://192.0.0.192/opc/v2/",
    "http://[::ffff:169.254.169.254]/",
    "http://224.0.0.1/",
    "http://240.0.0.1/",
]
# Names refused for what they are, without asking DNS.
NAME_URLS = [
    "http://localhost/",
    "http://LOCALHOST./",
    "http://api.localhost:8000/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://Metadata.Google.Internal./",
    "http://metadata.goog/",
    "http://metadata/",
    "http://instance-data/latest/",
    "http://instance-data.ec2.internal/",
]


@pytest.mark.parametrize("url", LITERAL_URLS + NAME_URLS)
@pytest.mark.parametrize("kind", ["webdav", "git", "s3"])
def test_a_source_is_refused_when_saved_for_an_address_or_name_that_is_blocked(
    url: str, kind: str, settings, resolver: Resolver
):
    settings.SOURCE_HOSTS = []
    resolver.strict = True
    with pytest.raises(RemoteError, match="PORTAL_SOURCE_HOSTS") as refused:
        check_host(Location(kind=kind, url=url, bucket="b"), resolve=False)
    host = urlsplit(url).hostname or ""
    assert host.rstrip(".") in str(refused.value).lower()


# Names whose DNS answer is blocked: refused when the sync resolves them.
BLOCKED_ANSWERS = [
    ["127.0.0.1"],
    ["::1"],
    ["169.254.169.254"],
    ["fd00:ec2::254"],
    ["::ffff:127.0.0.1"],
    ["64:ff9b::7f00:1"],
    ["0.0.0.0"],  # noqa: S104
    ["100.100.100.200"],
    ["192.0.0.192"],
    ["93.184.215.14", "127.0.0.1"],  # every address counts, not only the first
]


@pytest.mark.parametrize("answer", BLOCKED_ANSWERS)
def test_a_name_is_refused_for_any_address_it_resolves_to(answer: list[str], resolver: Resolver):
    resolver.answers["files.example.com"] = [answer]
    with pytest.raises(OutboundError, match=r"“files\.example\.com” leads to .*PORTAL_SOURCE_HOSTS"):
        Connector(Policy()).addresses("files.example.com", 443)
    with pytest.raises(OutboundError):
        Policy().check("files.example.com")


def test_private_addresses_by_name_follow_the_setting(settings, resolver: Resolver):
    settings.SOURCE_HOSTS = []
    resolver.answers["nas.example.com"] = [["192.168.1.20", "fd12::20"]]
    assert Connector().addresses("nas.example.com", 80) == ("192.168.1.20", "fd12::20")
    settings.SOURCE_PRIVATE_NETWORKS = False
    with pytest.raises(OutboundError, match="a private network address"):
        Connector().addresses("nas.example.com", 80)
    with pytest.raises(RemoteError, match="private network"):
        check_host(Location(kind="webdav", url="http://10.1.2.3/dav/"), resolve=False)
    settings.SOURCE_HOSTS = ["nas.example.com"]  # listed by name: reached wherever it is
    assert Connector().addresses("NAS.example.com.", 80) == ("192.168.1.20", "fd12::20")


def test_a_name_is_resolved_once_per_connector(resolver: Resolver):
    resolver.answers["files.example.com"] = [["93.184.215.14"], ["127.0.0.1"]]
    connector = Connector(Policy())
    for _ in range(3):
        assert connector.addresses("files.example.com", 443) == ("93.184.215.14",)
    assert connector.addresses("Files.Example.COM.", 80) == ("93.184.215.14",)
    assert resolver.calls["files.example.com"] == 1
    # a refusal is kept too: the name is not asked again in the hope of a better answer
    resolver.answers["other.example.com"] = [["127.0.0.1"], ["93.184.215.14"]]
    for _ in range(2):
        with pytest.raises(OutboundError):
            connector.addresses("other.example.com", 443)
    assert resolver.calls["other.example.com"] == 1


def test_with_hosts_listed_only_those_are_reached_and_at_any_address(settings, resolver: Resolver):
    settings.SOURCE_HOSTS = ["dav.example.com", "Intranet.Example.com."]
    resolver.answers["dav.example.com"] = [["127.0.0.1"]]
    resolver.answers["intranet.example.com"] = [["169.254.169.254"]]
    assert Connector().addresses("DAV.example.com", 443) == ("127.0.0.1",)
    assert Connector().addresses("intranet.example.com.", 443) == ("169.254.169.254",)
    resolver.strict = True  # an unlisted host is refused before it is looked up
    for host in ("files.example.com", "93.184.215.14", "localhost"):
        with pytest.raises(OutboundError, match="not one that PORTAL_SOURCE_HOSTS allows"):
            Connector().addresses(host, 443)


def test_unresolvable_and_malformed_names_are_refused(resolver: Resolver):
    resolver.answers["gone.example.com"] = [[]]
    with pytest.raises(OutboundError, match=r"“gone\.example\.com” could not be found"):
        Connector(Policy()).addresses("gone.example.com", 443)
    resolver.strict = True
    for host in ("exa mple.com", "ex%61mple.com", "a..b", "-a.example.com", "fe80::1%25eth0"):
        with pytest.raises(OutboundError, match="not a valid host name"):
            Connector(Policy()).addresses(host, 443)


def test_international_names_are_compared_and_resolved_in_their_ascii_form(settings, resolver: Resolver):
    settings.SOURCE_HOSTS = ["bücher.example"]
    resolver.answers["xn--bcher-kva.example"] = [["93.184.215.14"]]
    assert Connector().addresses("BÜCHER.example", 443) == ("93.184.215.14",)
    assert Connector().addresses("xn--bcher-kva.example", 443) == ("93.184.215.14",)


def test_git_is_told_the_checked_address_and_no_redirects_or_proxy(resolver: Resolver):
    resolver.answers["git.example.com"] = [["93.184.215.14", "2606:4700::1"]]
    url, config = Connector(Policy()).git_url_and_config("https://reader@GIT.example.com./team/docs.git")
    assert url == "https://reader@git.example.com/team/docs.git"
    assert config == [
        "-c",
        "http.followRedirects=false",
        "-c",
        "http.proxy=",
        "-c",
        "http.curloptResolve=git.example.com:443:93.184.215.14,[2606:4700::1]",
    ]
    # An address in another spelling is given to git as the address that was checked.
    url, config = Connector(Policy()).git_url_and_config("http://1572394766:8080/r.git")
    assert url == "http://93.184.215.14:8080/r.git"
    assert not any("curloptResolve" in option for option in config)


# -- the remotes against real servers -------------------------------------------------------


def webdav(url: str) -> WebDavRemote:
    return WebDavRemote(Location(kind="webdav", url=url), Credentials(USERNAME, PASSWORD))


def git_remote(url: str, workdir: Path) -> GitRemote:
    return GitRemote(Location(kind="git", url=url, workdir=workdir), Credentials(USERNAME, PASSWORD))


def s3(endpoint: str, bucket: str, server: S3Server | None = None) -> S3Remote:
    credentials = Credentials(server.access_key, server.secret_key) if server else Credentials("AKIAEXAMPLE", "k" * 40)
    return S3Remote(Location(kind="s3", url=endpoint, bucket=bucket, region="us-east-1"), credentials)


def listing(remote: WebDavRemote | GitRemote | S3Remote) -> dict[str, Entry]:
    try:
        return {entry.path: entry for entry in remote.entries()}
    finally:
        remote.close()


def list_remote(kind: str, base: str, folder: str, tmp_path: Path) -> dict[str, Entry]:
    """List a remote of `kind` on the server at `base`: its folder (WebDAV), repository (Git)
    or bucket (S3) named `folder`."""
    if kind == "webdav":
        return listing(webdav(f"{base}/{folder}/dav/"))
    if kind == "git":
        return listing(git_remote(f"{base}/{folder}/repo.git", tmp_path / "clone"))
    return listing(s3(base, folder))


@pytest.mark.parametrize("hop", ["302", "307", "308", "chain"])
@pytest.mark.parametrize("kind", ["webdav", "git", "s3"])
def test_no_remote_follows_a_redirect(hop: str, kind: str, settings, resolver: Resolver, blocked, tmp_path: Path):
    """The server is allowed by name; it redirects to 127.0.0.1, which is not: nothing gets there."""
    settings.SOURCE_HOSTS = ["files.example.com"]
    resolver.answers["files.example.com"] = [["127.0.0.1"]]
    with serve_wsgi(redirect_app(blocked.url)) as base:
        port = port_of(base)
        with pytest.raises(RemoteError) as refused:
            list_remote(kind, f"http://files.example.com:{port}", hop, tmp_path)
    assert "redirect" in str(refused.value)
    assert blocked.accepted == 0


def test_a_webdav_file_that_redirects_is_skipped(settings, resolver: Resolver, blocked, tmp_path: Path):
    settings.SOURCE_HOSTS = ["files.example.com"]
    resolver.answers["files.example.com"] = [["127.0.0.1"]]
    with serve_wsgi(redirect_app(blocked.url)) as base:
        remote = webdav(f"http://files.example.com:{port_of(base)}/307/dav/")
        followed = r"redirected it to http://127\.0\.0\.1:\d+/internal/dav/a\.md; redirects are not followed"
        with pytest.raises(FileError, match=followed):
            remote.fetch(Entry("a.md", "etag"), tmp_path / "a.md")
        remote.close()
    assert blocked.accepted == 0


@pytest.mark.parametrize(
    "host", ["files.example.com", "2130706433", "0x7f.1", "017700000001", "[::ffff:127.0.0.1]", "localhost"]
)
@pytest.mark.parametrize("kind", ["webdav", "git", "s3"])
def test_no_remote_connects_to_a_blocked_address(kind: str, host: str, settings, resolver: Resolver, blocked, tmp_path):
    settings.SOURCE_HOSTS = []
    resolver.answers["files.example.com"] = [["127.0.0.1"]]
    base = f"http://{host}:{blocked.port}"
    with pytest.raises(RemoteError, match="PORTAL_SOURCE_HOSTS") as refused:
        list_remote(kind, base, "docs", tmp_path)
    assert host.strip("[]") in str(refused.value)
    assert blocked.accepted == 0


def test_s3_checks_every_connection_not_only_the_listing(settings, resolver: Resolver, blocked, tmp_path: Path):
    settings.SOURCE_HOSTS = []
    resolver.answers["files.example.com"] = [["127.0.0.1"]]
    remote = s3(f"http://files.example.com:{blocked.port}", "docs")
    with pytest.raises(RemoteError, match=r"“files\.example\.com” leads to an address of this machine"):
        remote.fetch(Entry("a.md", "etag"), tmp_path / "a.md")
    remote.close()
    assert blocked.accepted == 0


# -- a DNS answer that changes between the check and the connection ---------------------------


@pytest.fixture
def rebinding(settings, resolver: Resolver) -> Callable[[str, str], AbstractContextManager[CountingListener]]:
    """For a server at `url` (on 127.0.0.1): the name `name` answers 127.0.0.1 the first time
    and 127.0.0.2 after, where a counting listener waits on the same port. The name is
    listed, so either address would be allowed: only the pinning keeps the connections on
    the first."""

    @contextmanager
    def arrange(name: str, url: str) -> Iterator[CountingListener]:
        settings.SOURCE_HOSTS = [name]
        resolver.answers[name] = [["127.0.0.1"], ["127.0.0.2"]]
        with counting_listener("127.0.0.2", port_of(url)) as listener:
            yield listener

    return arrange


def closing_each_connection(app: WsgiApp) -> WsgiApp:
    """`app`, with every answer closing its connection: each request connects anew."""

    def closing(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        def start(status: str, headers: list[tuple[str, str]], *args: Any) -> Any:
            return start_response(status, [*headers, ("Connection", "close")], *args)

        return app(environ, start)

    return closing


def test_webdav_connects_to_the_address_it_checked(rebinding, resolver, tmp_path):
    root = tmp_path / "share"
    write_files(root, {"a.md": "alpha", "deep/b.md": "beta"})
    with serve_wsgi(closing_each_connection(webdav_app(root))) as base, rebinding("dav.example.com", base) as later:
        remote = webdav(f"{base.replace('127.0.0.1', 'dav.example.com')}/dav/")
        entries = {entry.path: entry for entry in remote.entries()}  # two folders: two connections
        assert sorted(entries) == ["a.md", "deep/b.md"]
        remote.fetch(entries["deep/b.md"], tmp_path / "b.md")
        remote.close()
        assert (tmp_path / "b.md").read_text() == "beta"
        assert later.accepted == 0
    assert resolver.calls["dav.example.com"] == 1


def test_git_connects_to_the_address_it_checked(git_http_server: GitHttpServer, rebinding, resolver, tmp_path):
    publish(make_git_repo(tmp_path / "work", {"a.md": "alpha", "deep/b.md": "beta"}), git_http_server.root, "r.git")
    with rebinding("git.example.com", git_http_server.url) as later:
        # git.example.com is in no DNS: git finds it only through the address it was told.
        remote = git_remote(f"{git_http_server.url.replace('127.0.0.1', 'git.example.com')}/r.git", tmp_path / "clone")
        entries = {entry.path: entry for entry in remote.entries()}
        assert sorted(entries) == ["a.md", "deep/b.md"]
        assert remote.branch_name() == "main"
        remote.close()
        assert later.accepted == 0
    assert resolver.calls["git.example.com"] == 1


def test_s3_connects_to_the_address_it_checked(s3_server: S3Server, rebinding, resolver, tmp_path):
    bucket = f"rebind-{uuid4().hex[:8]}"
    s3_server.make_bucket(bucket, {"a.md": "alpha", "deep/b.md": "beta"})
    # a host name without dots: moto then reads the bucket from the path, as from MinIO's "minio:9000"
    with rebinding("objectstore", s3_server.endpoint_url) as later:
        remote = s3(s3_server.endpoint_url.replace("127.0.0.1", "objectstore"), bucket, s3_server)
        entries = {entry.path: entry for entry in remote.entries()}
        assert sorted(entries) == ["a.md", "deep/b.md"]
        remote.fetch(entries["deep/b.md"], tmp_path / "b.md")
        remote.close()
        assert (tmp_path / "b.md").read_text() == "beta"
        assert later.accepted == 0
    assert resolver.calls["objectstore"] == 1


# -- proxies and TLS ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["webdav", "git", "s3"])
def test_proxies_from_the_environment_are_not_used(
    kind: str, monkeypatch, blocked, webdav_server, git_http_server, s3_server, tmp_path
):
    """A proxy would resolve the name itself, out of the policy's reach: remotes connect directly."""
    bucket = f"proxy-{uuid4().hex[:8]}"
    write_files(webdav_server.root, {"a.md": "alpha"})
    publish(make_git_repo(tmp_path / "work", {"a.md": "alpha"}), git_http_server.root, "r.git")
    s3_server.make_bucket(bucket, {"a.md": "alpha"})
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, blocked.url)
    if kind == "webdav":
        remote: WebDavRemote | GitRemote | S3Remote = webdav(webdav_server.url)
    elif kind == "git":
        remote = git_remote(f"{git_http_server.url}/r.git", tmp_path / "clone")
    else:
        remote = s3(s3_server.endpoint_url, bucket, s3_server)
    assert list(listing(remote)) == ["a.md"]
    assert blocked.accepted == 0


def s3_no_such_bucket(environ, start_response):
    body = b"<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>"
    start_response("404 Not Found", [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
    return [body]


def test_tls_checks_the_name_while_connecting_to_the_checked_address(
    webdav_server: WebDavServer, settings, resolver: Resolver, monkeypatch, tmp_path: Path
):
    """Connections go to an address, yet the certificate must still be the name's (SNI too)."""
    write_files(webdav_server.root, {"a.md": "alpha"})
    settings.SOURCE_HOSTS = ["dav.example.com", "s3.example.com"]
    resolver.answers["dav.example.com"] = resolver.answers["s3.example.com"] = [["127.0.0.1"]]
    right = certificate(tmp_path / "right", "dav.example.com")
    s3_cert = certificate(tmp_path / "s3", "s3.example.com")
    wrong = certificate(tmp_path / "wrong", "other.example.com")
    bundle = tmp_path / "trusted.pem"
    bundle.write_bytes(right[0].read_bytes() + s3_cert[0].read_bytes() + wrong[0].read_bytes())
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))  # httpx
    monkeypatch.setenv("AWS_CA_BUNDLE", str(bundle))  # boto3
    dav_app = webdav_app(webdav_server.root)
    with serve_wsgi(dav_app, tls=right) as base:
        assert list(listing(webdav(base.replace("127.0.0.1", "dav.example.com") + "/dav/"))) == ["a.md"]
    with serve_wsgi(dav_app, tls=wrong) as base, pytest.raises(RemoteError, match="certificate is not trusted"):
        listing(webdav(base.replace("127.0.0.1", "dav.example.com") + "/dav/"))
    with serve_wsgi(s3_no_such_bucket, tls=s3_cert) as base, pytest.raises(RemoteError, match="does not exist"):
        listing(s3(base.replace("127.0.0.1", "s3.example.com"), "docs"))
    with serve_wsgi(s3_no_such_bucket, tls=wrong) as base, pytest.raises(RemoteError) as refused:
        listing(s3(base.replace("127.0.0.1", "s3.example.com"), "docs"))
    assert "does not exist" not in str(refused.value)


# -- Git from a folder on this server -------------------------------------------------------


def test_a_file_url_under_the_roots_is_a_git_source(roots: Path, tmp_path: Path, resolver: Resolver):
    resolver.strict = True
    repo = make_git_repo(roots / "handbook" / "repo", {"a.md": "alpha"})
    check_host(Location(kind="git", url=f"file://{repo}"), resolve=True)
    assert list(listing(git_remote(f"file://{repo}", tmp_path / "clone1"))) == ["a.md"]
    assert list(listing(git_remote(f"file://localhost{repo}", tmp_path / "clone2"))) == ["a.md"]
    with pytest.raises(RemoteError, match="file:///path"):
        git_remote(f"file://other-host{repo}", tmp_path / "clone3")
    outside = make_git_repo(tmp_path / "outside", {"secret.md": "no"})
    with pytest.raises(RemoteError, match="PORTAL_SOURCE_ROOTS"):
        git_remote(f"file://{outside}", tmp_path / "clone4")

"""Real servers for the sources' tests: a WebDAV share (wsgidav) and a Git smart-HTTP server
(git-http-backend), both with a user name and password, in a thread of the test process; an
S3 service (moto) in a subprocess, so that a Celery worker in another process reaches it
too, with authentication enforced; and helpers that build Git repositories with the git CLI.

For the outbound policy's tests: a listener that only counts the connections it accepts (a
"blocked" address that nothing may reach), and a server that answers every request with a
redirect to it.

The servers listen on 127.0.0.1 on a port of their own and stop when their `with` block or
fixture ends. Fixtures are registered under their `name=`; import them into a test module
(`from tests.sources.servers import s3_server_fixture  # noqa: F401`) or into a conftest."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cheroot import wsgi

from portal.services import die_with_parent
from tests.stack import free_port, wait_for

USERNAME = "reader"
PASSWORD = "s3cret-pa55word-of-the-share"  # long enough for portal.redact.scrub to take out
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Tester",
    "GIT_AUTHOR_EMAIL": "tester@example.com",
    "GIT_COMMITTER_NAME": "Tester",
    "GIT_COMMITTER_EMAIL": "tester@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_ALLOW_PROTOCOL": "file",  # `git submodule add` of a local repository
}

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


# -- a WSGI server in a thread --------------------------------------------------------------


@contextmanager
def serve_wsgi(app: WsgiApp, tls: tuple[Path, Path] | None = None, port: int = 0) -> Iterator[str]:
    """`app` served on 127.0.0.1 (a free port unless given) until the block ends; yields
    http://host:port, or https:// with `tls` (a certificate and its key, see `certificate`)."""
    server = wsgi.Server(("127.0.0.1", port), app, numthreads=4)
    server.expiration_interval = 0.02  # its loop's wait (0.5 s): stop() waits for the loop to notice
    if tls is not None:
        from cheroot.ssl.builtin import BuiltinSSLAdapter

        server.ssl_adapter = BuiltinSSLAdapter(str(tls[0]), str(tls[1]))
    server.prepare()
    port = server.bind_addr[1]
    thread = threading.Thread(target=server.serve, name=f"test-server-{port}", daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    finally:
        server.stop()
        thread.join(timeout=10)


def certificate(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for the host `name` and its key, written into `folder`; the
    certificate is also the CA file that trusts it."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = folder / f"{name}.crt", folder / f"{name}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


def _basic_auth_ok(environ: dict[str, Any], username: str, password: str) -> bool:
    expected = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()
    return bool(environ.get("HTTP_AUTHORIZATION", "") == expected)


# -- a listener that counts, and redirects to it ---------------------------------------------


class CountingListener:
    """Accepts TCP connections on `host`:`port` (0: a free port), counts them and closes each
    at once: where a test must show that nothing connected."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self._sock.bind((host, port))
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self.host, self.port = host, int(self._sock.getsockname()[1])
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=f"counting-{port}", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{f'[{self.host}]' if ':' in self.host else self.host}:{self.port}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _address = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()


@contextmanager
def counting_listener(host: str = "127.0.0.1", port: int = 0) -> Iterator[CountingListener]:
    listener = CountingListener(host, port)
    try:
        yield listener
    finally:
        listener.close()


def redirect_app(target: str) -> WsgiApp:
    """Answers every request with a redirect: the first path segment is the status ("302",
    "307", "308"), and "chain" redirects to "302" on this same server first. The redirect
    leads to `target`/internal/ and the rest of the path."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        first, _slash, rest = environ.get("PATH_INFO", "").lstrip("/").partition("/")
        if first == "chain":
            status, location = "302 Found", f"/302/{rest}"
        else:
            reasons = {"302": "Found", "307": "Temporary Redirect", "308": "Permanent Redirect"}
            code = first if first in reasons else "302"
            status, location = f"{code} {reasons[code]}", f"{target}/internal/{rest}"
        start_response(status, [("Location", location), ("Content-Length", "0")])
        return [b""]

    return app


# -- WebDAV ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class WebDavServer:
    url: str  # the share's URL, ending in "/"
    root: Path  # the folder it serves
    username: str
    password: str


@contextmanager
def webdav_server(root: Path, username: str = USERNAME, password: str = PASSWORD) -> Iterator[WebDavServer]:
    """wsgidav serving `root` at <server>/dav/ to `username` with `password` (Basic auth, the
    kind webdav4 sends; Digest is off)."""
    root.mkdir(parents=True, exist_ok=True)
    with serve_wsgi(webdav_app(root, username, password)) as base:
        yield WebDavServer(f"{base}/dav/", root, username, password)


def webdav_app(root: Path, username: str = USERNAME, password: str = PASSWORD) -> WsgiApp:
    """wsgidav's WSGI app serving `root` at /dav/ (serve it with `serve_wsgi`, over TLS too)."""
    from wsgidav.wsgidav_app import WsgiDAVApp

    return WsgiDAVApp(
        {
            "provider_mapping": {"/dav": str(root)},
            "http_authenticator": {"accept_basic": True, "accept_digest": False, "default_to_digest": False},
            "simple_dc": {"user_mapping": {"*": {username: {"password": password}}}},
            "verbose": 1,
            "logging": {"enable": False},
            "dir_browser": {"enable": False},
        }
    )


@pytest.fixture(name="webdav_server")
def webdav_server_fixture(tmp_path: Path) -> Iterator[WebDavServer]:
    """A WebDAV share of the empty folder tmp_path/"share" (write files there)."""
    with webdav_server(tmp_path / "share") as server:
        yield server


# -- Git -------------------------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` with a fixed author and no user configuration; its stdout."""
    result = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **GIT_ENV},
        check=False,
    )
    if result.returncode:
        raise AssertionError(f"git {' '.join(args)} failed: {result.stderr}")
    return result.stdout


def write_files(repo: Path, files: dict[str, str | bytes | None]) -> None:
    """Write (or, for None, delete) files under `repo`, creating folders."""
    for name, content in files.items():
        path = repo / name
        if content is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def commit(repo: Path, message: str = "change") -> str:
    """Stage everything in `repo` and commit it; the commit's id."""
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def make_git_repo(path: Path, files: dict[str, str | bytes | None], branch: str = "main") -> Path:
    """A new working repository at `path` on `branch` with `files` in its first commit."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "--quiet", f"--initial-branch={branch}")
    write_files(path, files)
    commit(path, "first")
    return path


def publish(repo: Path, server_root: Path, name: str) -> Path:
    """Push every branch of `repo` to the bare repository server_root/name (created the
    first time), which `git_http_server(server_root)` serves as <url>/name."""
    bare = server_root / name
    if not bare.exists():
        bare.parent.mkdir(parents=True, exist_ok=True)
        git(bare.parent, "init", "--quiet", "--bare", bare.name)
    git(repo, "push", "--quiet", "--force", "--all", str(bare))
    git(bare, "symbolic-ref", "HEAD", f"refs/heads/{git(repo, 'branch', '--show-current').strip()}")
    return bare


@dataclass(frozen=True)
class GitHttpServer:
    url: str  # <url>/<name> is the repository server_root/<name>
    root: Path
    username: str
    password: str


class GitHttpBackend:
    """git-http-backend (Git's own smart-HTTP CGI program) as a WSGI app behind Basic auth:
    the protocol GitHub, GitLab and Gitea speak, with the 401 that makes git ask GIT_ASKPASS."""

    def __init__(self, root: Path, username: str, password: str) -> None:
        self.root, self.username, self.password = root, username, password

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not _basic_auth_ok(environ, self.username, self.password):
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="git"'), ("Content-Length", "0")])
            return [b""]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else environ["wsgi.input"].read()
        cgi_env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "REMOTE_USER": self.username,
            "REMOTE_ADDR": "127.0.0.1",
            "REQUEST_METHOD": environ["REQUEST_METHOD"],
            "PATH_INFO": environ.get("PATH_INFO", ""),
            "QUERY_STRING": environ.get("QUERY_STRING", ""),
            "CONTENT_TYPE": environ.get("CONTENT_TYPE", ""),
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_CONTENT_ENCODING": environ.get("HTTP_CONTENT_ENCODING", ""),
            "GIT_PROTOCOL": environ.get("HTTP_GIT_PROTOCOL", ""),
        }
        result = subprocess.run(
            ["git", "http-backend"], input=body, env=cgi_env, capture_output=True, timeout=60, check=False
        )
        head, _sep, content = result.stdout.partition(b"\r\n\r\n")
        status, headers = "200 OK", []
        for line in head.decode("latin-1").split("\r\n"):
            name, _colon, value = line.partition(":")
            if name.lower() == "status":
                status = value.strip()
            elif name:
                headers.append((name, value.strip()))
        headers.append(("Content-Length", str(len(content))))
        start_response(status, headers)
        return [content]


@contextmanager
def git_http_server(root: Path, username: str = USERNAME, password: str = PASSWORD) -> Iterator[GitHttpServer]:
    """Git's smart HTTP for the bare repositories under `root` (see `publish`)."""
    root.mkdir(parents=True, exist_ok=True)
    with serve_wsgi(GitHttpBackend(root, username, password)) as base:
        yield GitHttpServer(base, root, username, password)


@pytest.fixture(name="git_http_server")
def git_http_server_fixture(tmp_path: Path) -> Iterator[GitHttpServer]:
    """A Git server for the bare repositories under tmp_path/"git-server"."""
    with git_http_server(tmp_path / "git-server") as server:
        yield server


# -- S3 (moto) -------------------------------------------------------------------------------


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str
    access_key: str  # an IAM user's key, allowed s3:*
    secret_key: str
    region: str = "us-east-1"

    def client(self, access_key: str | None = None, secret_key: str | None = None) -> Any:
        """A boto3 S3 client of this server (the allowed user's keys unless others are given)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id=access_key or self.access_key,
            aws_secret_access_key=secret_key or self.secret_key,
            config=Config(s3={"addressing_style": "path"}),
        )

    def make_bucket(self, name: str, files: dict[str, bytes | str] | None = None) -> Any:
        """Create the bucket `name` with `files` (key -> content); the client."""
        client = self.client()
        client.create_bucket(Bucket=name)
        for key, content in (files or {}).items():
            client.put_object(Bucket=name, Key=key, Body=content.encode() if isinstance(content, str) else content)
        return client

    def delete_bucket(self, name: str) -> None:
        """Empty the bucket and delete it."""
        client = self.client()
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
            for item in page.get("Contents", []):
                client.delete_object(Bucket=name, Key=item["Key"])
        client.delete_bucket(Bucket=name)


def _post(url: str, data: bytes) -> None:
    # text/plain: with urllib's default (a form) the server would read the body as form fields
    request = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "text/plain"})  # noqa: S310
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        response.read()


def _moto_up(url: str) -> bool:
    with suppress(OSError), urllib.request.urlopen(f"{url}/moto-api/data.json", timeout=2) as response:  # noqa: S310
        return bool(response.status == 200)
    return False


def _enforce_auth(endpoint_url: str, region: str) -> tuple[str, str]:
    """Make an IAM user allowed s3:* with an access key, then have moto check every request's
    signature and permissions from now on (POST /moto-api/reset-auth with 0 free requests).
    Until then moto accepts any credentials."""
    import boto3

    iam = boto3.client(
        "iam",
        endpoint_url=endpoint_url,
        region_name=region,
        aws_access_key_id="setup",
        aws_secret_access_key="setup-secret",  # moto accepts anything before reset-auth
    )
    iam.create_user(UserName="portal-sync")
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    iam.put_user_policy(UserName="portal-sync", PolicyName="s3-all", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName="portal-sync")["AccessKey"]
    _post(f"{endpoint_url}/moto-api/reset-auth", b"0")
    return key["AccessKeyId"], key["SecretAccessKey"]


@contextmanager
def moto_s3_server(log: Path, region: str = "us-east-1") -> Iterator[S3Server]:
    """moto's server in a subprocess on a free port, with authentication enforced: only the
    yielded access key (an IAM user allowed s3:*) gets in; any other key is refused."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
    try:
        wait_for(lambda: proc.poll() is None and _moto_up(url), 30, "moto server start", log)
        access_key, secret_key = _enforce_auth(url, region)
        yield S3Server(url, access_key, secret_key, region)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session", name="s3_server")
def s3_server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One moto S3 server for the session; tests keep apart by bucket names of their own."""
    with moto_s3_server(tmp_path_factory.mktemp("moto") / "moto.log") as server:
        yield server

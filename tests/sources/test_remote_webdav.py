"""WebDavRemote against a real wsgidav share with a user name and password
(tests.sources.servers)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from sources.remotes.base import Credentials, Entry, FileError, Location, RemoteError
from sources.remotes.webdav import WebDavRemote
from tests.sources.servers import (
    WebDavServer,
    webdav_server_fixture,  # noqa: F401 (the webdav_server fixture)
    write_files,
)
from tests.stack import free_port


def open_dav(server: WebDavServer, credentials: Credentials | None = None, **location: Any) -> WebDavRemote:
    if credentials is None:
        credentials = Credentials(server.username, server.password)
    return WebDavRemote(Location(kind="webdav", url=server.url, **location), credentials)


def listing(remote: WebDavRemote) -> dict[str, Entry]:
    try:
        return {entry.path: entry for entry in remote.entries()}
    finally:
        remote.close()


def test_lists_nested_folders_and_fetches(webdav_server: WebDavServer, tmp_path: Path):
    big = os.urandom(3 * 1024 * 1024 + 17)
    write_files(
        webdav_server.root,
        {
            "top.md": "top",
            "empty.txt": "",
            "guide/setup notes.md": "setup",
            "guide/deeper/still deeper/Ünïcode #1.md": "deep",
            "media/big.bin": big,
        },
    )
    (webdav_server.root / "empty folder").mkdir()

    remote = open_dav(webdav_server)
    entries = {entry.path: entry for entry in remote.entries()}
    assert set(entries) == {
        "top.md",
        "empty.txt",
        "guide/setup notes.md",
        "guide/deeper/still deeper/Ünïcode #1.md",
        "media/big.bin",
    }
    assert entries["empty.txt"].size == 0
    assert entries["media/big.bin"].size == len(big)
    assert all(entry.signal for entry in entries.values())

    remote.fetch(entries["media/big.bin"], tmp_path / "big")
    assert (tmp_path / "big").read_bytes() == big
    remote.fetch(entries["guide/deeper/still deeper/Ünïcode #1.md"], tmp_path / "deep")
    assert (tmp_path / "deep").read_text() == "deep"
    remote.fetch(entries["empty.txt"], tmp_path / "empty")
    assert (tmp_path / "empty").read_bytes() == b""

    assert remote.link("guide/setup notes.md") == f"{webdav_server.url}guide/setup%20notes.md"
    remote.close()


def test_the_etag_changes_with_the_content_only(webdav_server: WebDavServer):
    write_files(webdav_server.root, {"a.md": "alpha", "b.md": "bravo"})
    first = listing(open_dav(webdav_server))
    time.sleep(0.01)
    write_files(webdav_server.root, {"a.md": "alpha, edited"})
    second = listing(open_dav(webdav_server))
    assert second["a.md"].signal != first["a.md"].signal
    assert second["b.md"].signal == first["b.md"].signal


def test_a_sub_folder_as_root_and_link_template(webdav_server: WebDavServer, tmp_path: Path):
    write_files(webdav_server.root, {"outside.md": "no", "team/docs/a b.md": "a", "team/docs/x/y.md": "y"})
    template = "https://cloud.example.com/f?path={path}"
    remote = open_dav(webdav_server, prefix="/team/docs/", link_template=template)
    entries = {entry.path: entry for entry in remote.entries()}
    assert set(entries) == {"a b.md", "x/y.md"}
    remote.fetch(entries["x/y.md"], tmp_path / "y")
    assert (tmp_path / "y").read_text() == "y"
    assert remote.link("a b.md") == "https://cloud.example.com/f?path=team/docs/a%20b.md"
    remote.close()

    with pytest.raises(RemoteError, match="The folder “nope” does not exist"):
        listing(open_dav(webdav_server, prefix="nope"))


def test_a_file_removed_after_the_listing_is_a_file_error(webdav_server: WebDavServer, tmp_path: Path):
    write_files(webdav_server.root, {"a.md": "a", "b.md": "b"})
    remote = open_dav(webdav_server)
    entries = listing(remote)
    (webdav_server.root / "a.md").unlink()
    remote = open_dav(webdav_server)
    with pytest.raises(FileError, match="removed"):
        remote.fetch(entries["a.md"], tmp_path / "a")
    remote.fetch(entries["b.md"], tmp_path / "b")
    remote.close()


def test_wrong_or_missing_credentials(webdav_server: WebDavServer):
    write_files(webdav_server.root, {"a.md": "a"})
    wrong = Credentials(webdav_server.username, "not-the-password-of-the-share")
    with pytest.raises(RemoteError) as refused:
        listing(open_dav(webdav_server, wrong))
    assert str(refused.value) == "The WebDAV server refused the user name or password."
    assert "not-the-password" not in repr(refused.value)
    assert refused.value.__cause__ is None

    with pytest.raises(RemoteError, match="asks for a user name and password"):
        listing(open_dav(webdav_server, Credentials()))


def test_unreachable_server_and_bad_addresses(tmp_path: Path):
    server = WebDavServer(f"http://127.0.0.1:{free_port()}/dav/", tmp_path, "u", "p")
    started = time.monotonic()
    with pytest.raises(RemoteError) as error:
        listing(open_dav(server))
    assert str(error.value) == "Could not reach 127.0.0.1: connection refused."
    assert time.monotonic() - started < 15

    with pytest.raises(RemoteError, match="https://"):
        open_dav(WebDavServer("ftp://example.com/", tmp_path, "u", "p"))


def test_a_server_that_is_not_webdav(tmp_path: Path):
    from tests.sources.servers import serve_wsgi

    def html(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/html")])
        return [b"<html><body>Welcome</body></html>"]

    with serve_wsgi(html) as url, pytest.raises(RemoteError, match="did not answer as a WebDAV server"):
        listing(open_dav(WebDavServer(f"{url}/", tmp_path, "u", "p")))

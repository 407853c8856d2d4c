"""GitRemote against real repositories: made with the git CLI, served by git-http-backend
behind Basic auth (tests.sources.servers) or read from a path under PORTAL_SOURCE_ROOTS."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from sources.remotes.base import Credentials, Entry, FileError, Location, RemoteError
from sources.remotes.git import GitRemote
from tests.sources.servers import (
    PASSWORD,
    USERNAME,
    GitHttpServer,
    commit,
    git,
    git_http_server_fixture,  # noqa: F401 (the git_http_server fixture)
    make_git_repo,
    publish,
    write_files,
)
from tests.stack import free_port

RIGHT = Credentials(USERNAME, PASSWORD)


def open_git(url: str, workdir: Path, credentials: Credentials = RIGHT, **location: str) -> GitRemote:
    return GitRemote(Location(kind="git", url=url, workdir=workdir, **location), credentials)


def listing(remote: GitRemote) -> dict[str, Entry]:
    try:
        return {entry.path: entry for entry in remote.entries()}
    finally:
        remote.close()


def content(remote: GitRemote, entry: Entry, tmp_path: Path) -> bytes:
    destination = tmp_path / "fetched"
    remote.fetch(entry, destination)
    return destination.read_bytes()


def test_lists_and_follows_adds_edits_renames_and_deletes(git_http_server: GitHttpServer, tmp_path: Path):
    repo = make_git_repo(
        tmp_path / "work",
        {"a.md": "alpha", "docs/b.md": "bravo", "docs/c.md": "charlie", "image.bin": b"\x00\x01" * 5000, "empty": ""},
    )
    publish(repo, git_http_server.root, "docs.git")
    url, workdir = f"{git_http_server.url}/docs.git", tmp_path / "clone"

    remote = open_git(url, workdir, branch="main")
    first = {entry.path: entry for entry in remote.entries()}
    assert set(first) == {"a.md", "docs/b.md", "docs/c.md", "image.bin", "empty"}
    assert first["image.bin"].size == 10000
    assert first["empty"].size == 0
    blob = git(repo, "rev-parse", "HEAD:docs/b.md").strip()
    assert first["docs/b.md"].signal == first["docs/b.md"].content_id == blob
    assert content(remote, first["image.bin"], tmp_path) == b"\x00\x01" * 5000
    assert content(remote, first["empty"], tmp_path) == b""
    remote.close()

    write_files(repo, {"docs/b.md": "bravo, edited", "a.md": None, "new.md": "new"})
    git(repo, "mv", "docs/c.md", "docs/renamed c.md")
    commit(repo, "edit, rename, delete, add")
    publish(repo, git_http_server.root, "docs.git")

    remote = open_git(url, workdir, branch="main")  # the same workdir: a fetch, not a new clone
    second = {entry.path: entry for entry in remote.entries()}
    assert set(second) == {"docs/b.md", "docs/renamed c.md", "image.bin", "empty", "new.md"}
    assert second["docs/b.md"].signal != first["docs/b.md"].signal
    assert second["docs/renamed c.md"].content_id == first["docs/c.md"].content_id
    assert second["image.bin"].signal == first["image.bin"].signal
    assert second["empty"].signal == first["empty"].signal
    assert content(remote, second["docs/b.md"], tmp_path) == b"bravo, edited"
    remote.close()
    assert (workdir / "HEAD").is_file()
    assert (workdir / "shallow").is_file()  # only the newest commit was fetched
    assert not list(tmp_path.glob("portal-askpass-*"))


def test_default_branch_prefix_and_links(git_http_server: GitHttpServer, tmp_path: Path):
    repo = make_git_repo(tmp_path / "work", {"README.md": "top", "docs/guide/setup notes.md": "s", "docs/x.md": "x"})
    publish(repo, git_http_server.root, "r.git")
    template = "https://git.example.com/team/r/src/branch/{branch}/{path}"
    remote = open_git(f"{git_http_server.url}/r.git", tmp_path / "clone", prefix="/docs/", link_template=template)
    assert set(listing(remote)) == {"guide/setup notes.md", "x.md"}
    # {path} is from the repository's top, prefix included, percent-encoded; {branch} the
    # default branch when none is configured.
    assert remote.link("guide/setup notes.md") == (
        "https://git.example.com/team/r/src/branch/main/docs/guide/setup%20notes.md"
    )
    assert open_git("https://example.com/r.git", tmp_path / "unused").link("x.md") == ""

    missing = open_git(f"{git_http_server.url}/r.git", tmp_path / "clone", prefix="nope", branch="main")
    with pytest.raises(RemoteError, match="“nope” is not in"):
        listing(missing)


def test_submodules_and_symlinks_become_problems(settings, tmp_path: Path):
    settings.SOURCE_ROOTS = [str(tmp_path)]
    library = make_git_repo(tmp_path / "library", {"lib.md": "lib"})
    repo = make_git_repo(tmp_path / "work", {"a.md": "a"})
    git(repo, "submodule", "--quiet", "add", str(library), "vendor/library")
    (repo / "link.md").symlink_to("a.md")
    commit(repo, "submodule and symlink")

    remote = open_git(str(repo), tmp_path / "clone")
    entries = {entry.path: entry for entry in remote.entries()}
    assert set(entries) == {"a.md", ".gitmodules", "vendor/library", "link.md"}
    assert "submodule" in entries["vendor/library"].problem
    assert "symbolic link" in entries["link.md"].problem
    assert not entries["a.md"].problem
    with pytest.raises(FileError, match="submodule"):
        remote.fetch(entries["vendor/library"], tmp_path / "out")
    remote.close()


def test_a_path_on_the_server_only_under_the_source_roots(settings, tmp_path: Path):
    repo = make_git_repo(tmp_path / "allowed" / "repo", {"a.md": "a"})
    settings.SOURCE_ROOTS = [str(tmp_path / "allowed")]
    assert set(listing(open_git(str(repo), tmp_path / "clone"))) == {"a.md"}
    assert set(listing(open_git(f"file://{repo}", tmp_path / "clone"))) == {"a.md"}

    outside = make_git_repo(tmp_path / "outside", {"b.md": "b"})
    with pytest.raises(RemoteError, match="PORTAL_SOURCE_ROOTS"):
        open_git(str(outside), tmp_path / "clone2")
    with pytest.raises(RemoteError, match="not a Git address"):
        open_git("ext::sh -c touch% /tmp/pwned", tmp_path / "clone3")
    with pytest.raises(RemoteError, match="not a Git address"):
        open_git("git@example.com:team/r.git", tmp_path / "clone3")


def test_missing_branch_and_repository(git_http_server: GitHttpServer, tmp_path: Path):
    repo = make_git_repo(tmp_path / "work", {"a.md": "a"})
    publish(repo, git_http_server.root, "r.git")
    with pytest.raises(RemoteError, match="The branch “release” does not exist"):
        listing(open_git(f"{git_http_server.url}/r.git", tmp_path / "clone", branch="release"))
    with pytest.raises(RemoteError, match="There is no Git repository at"):
        listing(open_git(f"{git_http_server.url}/missing.git", tmp_path / "clone2"))
    with pytest.raises(RemoteError, match="not a valid branch name"):
        listing(open_git(f"{git_http_server.url}/r.git", tmp_path / "clone3", branch="a..b"))


def test_credentials_go_through_askpass_never_into_messages(git_http_server: GitHttpServer, tmp_path: Path):
    repo = make_git_repo(tmp_path / "work", {"a.md": "a"})
    publish(repo, git_http_server.root, "r.git")
    url = f"{git_http_server.url}/r.git"
    wrong = Credentials(USERNAME, "wrong-password-that-is-long")
    with pytest.raises(RemoteError) as refused:
        listing(open_git(url, tmp_path / "clone", credentials=wrong))
    assert str(refused.value) == "The Git server refused the user name or password."
    with pytest.raises(RemoteError, match="asks for a user name"):
        listing(open_git(url, tmp_path / "clone", credentials=Credentials()))
    with pytest.raises(RemoteError, match="not in the repository's address"):
        open_git(f"http://{USERNAME}:{PASSWORD}@{url.removeprefix('http://')}", tmp_path / "clone")
    # The right ones, after the failures, in the same workdir.
    assert set(listing(open_git(url, tmp_path / "clone"))) == {"a.md"}


def test_unreachable_server(tmp_path: Path):
    started = time.monotonic()
    with pytest.raises(RemoteError) as error:
        listing(open_git(f"http://127.0.0.1:{free_port()}/r.git", tmp_path / "clone"))
    assert str(error.value) == "Could not reach 127.0.0.1: connection refused."
    assert time.monotonic() - started < 15


def test_a_damaged_workdir_is_cloned_again(git_http_server: GitHttpServer, tmp_path: Path):
    repo = make_git_repo(tmp_path / "work", {"a.md": "a"})
    publish(repo, git_http_server.root, "r.git")
    url, workdir = f"{git_http_server.url}/r.git", tmp_path / "clone"
    listing(open_git(url, workdir))
    for item in workdir.iterdir():  # objects, refs and HEAD gone; some junk instead
        if item.is_file():
            item.unlink()
        else:
            shutil.rmtree(item)
    (workdir / "junk").write_text("not a repository")
    assert set(listing(open_git(url, workdir))) == {"a.md"}

    workdir.joinpath("refs", "portal", "source").write_text("0" * 40 + "\n")  # a ref to nothing
    for stored in (workdir / "objects").rglob("*"):
        if stored.is_file():
            stored.chmod(0o600)
            stored.unlink()
    assert set(listing(open_git(url, workdir))) == {"a.md"}


def test_an_unchanged_thousand_file_repository_relists_quickly(git_http_server: GitHttpServer, tmp_path: Path):
    files: dict[str, str | bytes | None] = {f"section-{i // 100}/page-{i}.md": f"# Page {i}\n" for i in range(1000)}
    repo = make_git_repo(tmp_path / "work", files)
    publish(repo, git_http_server.root, "big.git")
    url, workdir = f"{git_http_server.url}/big.git", tmp_path / "clone"

    remote = open_git(url, workdir)
    first = list(remote.entries())
    started = time.monotonic()
    for entry in first:
        destination = tmp_path / "out" / entry.path
        destination.parent.mkdir(parents=True, exist_ok=True)
        remote.fetch(entry, destination)
    fetch_all = time.monotonic() - started
    remote.close()
    assert (tmp_path / "out" / "section-9" / "page-999.md").read_text() == "# Page 999\n"

    started = time.monotonic()
    second = listing(open_git(url, workdir))
    relist = time.monotonic() - started
    assert {entry.path: entry.signal for entry in first} == {path: e.signal for path, e in second.items()}
    print(f"1000 files: all fetched in {fetch_all:.2f} s, unchanged re-listing {relist:.2f} s")
    assert relist < 5
    assert fetch_all < 10


def test_a_server_that_never_answers_the_connection_times_out(monkeypatch, tmp_path: Path):
    """A listening socket whose accept queue is full drops new SYNs (Linux), as a firewall
    that swallows packets does: git alone would wait minutes, the probe gives up."""
    import socket

    from sources.remotes import git as git_module

    monkeypatch.setattr(git_module, "CONNECT_TIMEOUT_S", 1)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        queued = [socket.create_connection(("127.0.0.1", port), timeout=1) for _ in range(1)]
        try:
            started = time.monotonic()
            with pytest.raises(RemoteError) as error:
                listing(open_git(f"http://127.0.0.1:{port}/r.git", tmp_path / "clone"))
            assert str(error.value) == "Could not reach 127.0.0.1: the connection timed out."
            assert time.monotonic() - started < 5
        finally:
            for sock in queued:
                sock.close()

"""A server folder stays under PORTAL_SOURCE_ROOTS through links (issue 36): its folder in
the source resolved and checked (refused when saved, the run failing when a link appears
later), every link met while walking resolved and skipped with its reason when it leaves the
roots or the folder or loops back, and a file read without following a link swapped in
after the listing. Real folders and links, the sync engine run inline."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from django.urls import reverse

from common.runs import claim
from knowledge.models import Document
from sources import sync
from sources.actions import do_save_source
from sources.models import Source, SyncRun
from sources.remotes import Credentials, FileError, Location, RemoteError
from sources.remotes.folder import FolderRemote, open_resolved
from tests.conftest import token_for

pytestmark = pytest.mark.usefixtures("media")


def run_sync(source: Source) -> SyncRun:
    run = SyncRun.objects.create(source=source)
    assert claim(run)
    return sync.execute(run, inline=True)


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder outside PORTAL_SOURCE_ROOTS with a secret in it."""
    folder = tmp_path / "private"
    folder.mkdir()
    (folder / "secret.md").write_text("# Secret\n\nThe server's own file.\n")
    return folder


def folder_source(collection, roots: Path, prefix: str = "") -> Source:
    source = Source(collection=collection, name="Share", kind="folder", url=str(roots / "handbook"), prefix=prefix)
    return do_save_source(source)


def test_a_folder_in_the_source_that_links_outside_the_roots_fails_the_run(alice, private_collection, roots, outside):
    source = folder_source(private_collection, roots, prefix="escape")  # saved before the link exists
    (roots / "handbook" / "escape").symlink_to(outside, target_is_directory=True)
    run = run_sync(source)
    assert run.status == SyncRun.Status.FAILED
    assert "escape" in run.error
    assert "PORTAL_SOURCE_ROOTS" in run.error
    assert str(outside) not in run.error
    assert not Document.objects.filter(collection=private_collection).exists()
    with pytest.raises(RemoteError):
        list(FolderRemote(source.location(), Credentials()).entries())


def test_links_leaving_the_roots_or_the_folder_are_skipped_with_a_reason(alice, private_collection, roots, outside):
    handbook = roots / "handbook"
    (handbook / "leak.md").symlink_to(outside / "secret.md")
    (handbook / "leak-dir").symlink_to(outside, target_is_directory=True)
    (roots / "elsewhere").mkdir()
    (roots / "elsewhere" / "other.md").write_text("# Other\n")
    (handbook / "sideways.md").symlink_to(roots / "elsewhere" / "other.md")
    (handbook / "sub").mkdir()
    (handbook / "sub" / "loop").symlink_to(handbook, target_is_directory=True)
    run = run_sync(folder_source(private_collection, roots))
    assert run.status == SyncRun.Status.SUCCEEDED, run.error
    reasons = {failure["path"]: failure["error"] for failure in run.failures}
    assert "PORTAL_SOURCE_ROOTS" in reasons["leak.md"]
    assert "PORTAL_SOURCE_ROOTS" in reasons["leak-dir"]
    assert "outside the folder" in reasons["sideways.md"]
    assert "holds it" in reasons["sub/loop"]
    assert set(reasons) == {"leak.md", "leak-dir", "sideways.md", "sub/loop"}
    assert run.counts["added"] == 0
    assert not Document.objects.filter(collection=private_collection).exists()


def test_a_link_inside_the_folder_is_still_synced(roots):
    handbook = roots / "handbook"
    (handbook / "real").mkdir()
    (handbook / "real" / "a.md").write_text("# A\n")
    (handbook / "alias").symlink_to(handbook / "real", target_is_directory=True)
    remote = FolderRemote(Location(kind="folder", url=str(handbook)), Credentials())
    listed = {entry.path: entry for entry in remote.entries()}
    assert set(listed) == {"alias/a.md", "real/a.md"}
    assert not any(entry.problem for entry in listed.values())


def test_a_link_swapped_in_after_the_listing_is_not_followed(roots, outside, tmp_path):
    handbook = roots / "handbook"
    (handbook / "docs").mkdir()
    (handbook / "docs" / "a.md").write_text("# A\n")
    (handbook / "b.md").write_text("# B\n")
    remote = FolderRemote(Location(kind="folder", url=str(handbook)), Credentials())
    listed = {entry.path: entry for entry in remote.entries()}
    copy = tmp_path / "copy"
    remote.fetch(listed["b.md"], copy)
    assert copy.read_text() == "# B\n"

    (handbook / "b.md").unlink()
    (handbook / "b.md").symlink_to(outside / "secret.md")
    os.rename(handbook / "docs", tmp_path / "docs-moved")
    (handbook / "docs").symlink_to(outside, target_is_directory=True)
    (outside / "a.md").write_text("# Outside\n")
    for path in ("b.md", "docs/a.md"):
        copy.unlink(missing_ok=True)
        with pytest.raises(FileError, match="link"):
            remote.fetch(listed[path], copy)
        assert not copy.exists() or "Secret" not in copy.read_text()


def test_opening_a_resolved_path_follows_no_link(roots, outside):
    """What fetch relies on when a link appears between resolving a path and opening it."""
    (roots / "handbook" / "via").symlink_to(outside, target_is_directory=True)
    for path in (roots / "handbook" / "via" / "secret.md", roots / "handbook" / "via"):
        with pytest.raises(OSError, match=r"symbolic links|Not a directory") as raised:
            open_resolved(path)
        assert raised.value.errno in (errno.ELOOP, errno.ENOTDIR)
    fd = open_resolved(outside.resolve() / "secret.md")
    os.close(fd)


def test_a_folder_in_the_source_that_links_outside_is_refused_when_saved(
    api, alice, private_collection, roots, outside
):
    (roots / "handbook" / "escape").symlink_to(outside, target_is_directory=True)
    token_for(api, alice)
    fields = {"name": "Share", "kind": "folder", "url": str(roots / "handbook"), "prefix": "escape"}
    response = api.post(reverse("collection-source-list", args=[private_collection.pk]), fields, format="json")
    assert response.status_code == 400
    assert "prefix" in response.json()
    assert str(outside) not in response.content.decode()
    assert not Source.objects.exists()

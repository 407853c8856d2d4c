"""Each kind of remote source synced twice through a real Celery worker, with changes between:
a Git repository served over HTTP by git's own backend (commits made with the git CLI), a
WebDAV share (wsgidav) and an S3 API (moto in server mode), each behind a user name and
password; PostgreSQL + pgvector, Redis and the local embedder. Then bad input run by run: wrong
credentials, an unreachable host, a bucket that vanishes mid-sync, a Git submodule — each a
readable error, nothing already indexed lost, no secret in a run, a response or the log."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from assistant.retrieval.search import search
from common.runs import claim
from knowledge.models import Document
from sources import actions, sync
from sources.models import Source, SyncRun
from sources.remotes import Credentials
from tests.sources.servers import (  # noqa: F401 - fixtures
    PASSWORD,
    USERNAME,
    commit,
    git,
    git_http_server_fixture,
    make_git_repo,
    publish,
    s3_server_fixture,
    webdav_server_fixture,
    write_files,
)
from tests.stack import celery_worker, free_port, wait_for

pytestmark = [pytest.mark.usefixtures("media"), pytest.mark.django_db(transaction=True)]

FIRST = {
    "travel.md": "# Travel\n\nHotels in Beijing are capped at 600 yuan a night.\n",
    "leave.md": "# Leave\n\nEvery employee has 25 days of paid leave a year.\n",
    "notes/parking.md": "# Parking\n\nParking permits are renewed each March.\n",
    "notes/old.md": "# Old\n\nThe cafeteria closes at 14:30 on Fridays.\n",
}
# Then: travel.md edited, notes/old.md deleted, notes/parking.md renamed, one file added,
# and an empty one (refused alone).
# The edit changes the size: a WebDAV server's ETag may be its file's whole-second mtime and
# size (wsgidav's is), so an edit of the same size within the second of the last listing
# looks unchanged until the next one (docs/sources.md).
SECOND = {
    "travel.md": "# Travel\n\nHotels in Beijing are capped at 1,750 yuan a night.\n",
    "notes/old.md": None,
    "notes/parking.md": None,
    "archive/parking.md": FIRST["notes/parking.md"],
    "expenses.md": "# Expenses\n\nTaxi receipts must be filed within 30 days.\n",
    "empty.md": b"",
}


@dataclass
class Remote:
    source: Source
    change: Callable[[dict[str, str | bytes | None]], None]


@pytest.fixture
def worker(tmp_path, monkeypatch) -> Iterator[Path]:
    monkeypatch.setenv("PORTAL_SOURCE_WORKDIR", str(tmp_path / "clones"))
    log = tmp_path / "worker.log"
    with celery_worker(log) as proc:
        wait_for(lambda: b"ready." in log.read_bytes() or proc.poll() is not None, 60, "worker start", log)
        assert proc.poll() is None, log.read_text()
        yield log


def synced(source: Source, log: Path) -> SyncRun:
    """Start a sync as "Sync now" does and wait for it and the ingestion it queued."""
    run = actions.do_start_sync(source)

    def done() -> bool:
        run.refresh_from_db()
        busy = Document.objects.filter(
            collection=source.collection, status__in=(Document.Status.PENDING, Document.Status.PROCESSING)
        )
        return run.status in (SyncRun.Status.SUCCEEDED, SyncRun.Status.FAILED) and not busy.exists()

    wait_for(done, 240, "the sync and its ingestion", log)
    return run


def git_remote(collection, server, tmp_path) -> Remote:
    repo = make_git_repo(tmp_path / "repo", dict(FIRST))
    publish(repo, server.root, "docs.git")

    def change(files):
        write_files(repo, files)
        commit(repo)
        publish(repo, server.root, "docs.git")

    source = Source(collection=collection, name="git", kind=Source.Kind.GIT, url=f"{server.url}/docs.git")
    source.branch = "main"
    actions.do_save_source(source, credentials=Credentials(server.username, server.password))
    return Remote(source, change)


def webdav_remote(collection, server) -> Remote:
    write_files(server.root, dict(FIRST))
    source = Source(collection=collection, name="dav", kind=Source.Kind.WEBDAV, url=server.url)
    actions.do_save_source(source, credentials=Credentials(server.username, server.password))
    return Remote(source, lambda files: write_files(server.root, files))


def s3_remote(collection, server, bucket: str) -> Remote:
    client = server.make_bucket(bucket, {f"team/{k}": v for k, v in FIRST.items()})

    def change(files):
        for key, content in files.items():
            if content is None:
                client.delete_object(Bucket=bucket, Key=f"team/{key}")
            else:
                client.put_object(Bucket=bucket, Key=f"team/{key}", Body=content)

    source = Source(collection=collection, name="s3", kind=Source.Kind.S3, url=server.endpoint_url, bucket=bucket)
    source.prefix, source.region = "team", server.region
    actions.do_save_source(source, credentials=Credentials(server.access_key, server.secret_key))
    return Remote(source, change)


@pytest.mark.parametrize("kind", ["git", "webdav", "s3"])
def test_a_source_synced_twice_through_a_worker(kind, request, alice, private_collection, tmp_path, worker):
    if kind == "git":
        remote = git_remote(private_collection, request.getfixturevalue("git_http_server"), tmp_path)
    elif kind == "webdav":
        remote = webdav_remote(private_collection, request.getfixturevalue("webdav_server"))
    else:
        remote = s3_remote(private_collection, request.getfixturevalue("s3_server"), f"sync-{free_port()}")
    secret = remote.source.credentials().password

    first = synced(remote.source, worker)
    assert first.status == SyncRun.Status.SUCCEEDED, first.error
    assert (first.counts["added"], first.counts["failed"]) == (4, 0), first.counts
    documents = {d.rel_path: d for d in Document.objects.filter(collection=private_collection)}
    assert set(documents) == set(FIRST)
    assert all(d.status == Document.Status.READY for d in documents.values())

    remote.change(SECOND)
    second = synced(remote.source, worker)
    assert second.status == SyncRun.Status.SUCCEEDED, second.error
    counts = second.counts
    assert (counts["added"], counts["changed"], counts["renamed"], counts["deleted"]) == (1, 1, 1, 1), counts
    assert counts["unchanged"] == 1
    assert [f["path"] for f in second.failures] == ["empty.md"]
    after = {d.rel_path: d for d in Document.objects.filter(collection=private_collection)}
    assert set(after) == {"travel.md", "leave.md", "archive/parking.md", "expenses.md"}
    assert after["archive/parking.md"].pk == documents["notes/parking.md"].pk  # renamed, not re-made
    hits = search(alice, "Beijing hotel cap per night", collection_ids=[private_collection.pk], rerank=False).hits
    assert "1,750" in hits[0].text

    # No secret in what was stored or logged.
    for run in (first, second):
        assert secret not in f"{run.error} {run.failures}"
    assert secret.encode() not in worker.read_bytes()


def run_inline(source: Source) -> SyncRun:
    run = SyncRun.objects.create(source=source)
    assert claim(run)
    return sync.execute(run, inline=True)


def test_wrong_credentials_and_unreachable_hosts_fail_the_run_and_keep_everything(
    private_collection, tmp_path, webdav_server, git_http_server, s3_server
):
    dav = webdav_remote(private_collection, webdav_server)
    assert run_inline(dav.source).counts["added"] == 4
    kept = sorted(Document.objects.filter(collection=private_collection).values_list("pk", "sha256"))

    wrong = "not-the-password-at-all"
    actions.do_save_source(dav.source, credentials=Credentials(USERNAME, wrong))
    run = run_inline(dav.source)
    assert run.status == SyncRun.Status.FAILED
    assert "user name or password" in run.error, run.error
    assert wrong not in run.error

    dead = f"http://127.0.0.1:{free_port()}/dav/"
    dav.source.url = dead
    actions.do_save_source(dav.source, credentials=Credentials(USERNAME, PASSWORD))
    run = run_inline(dav.source)
    assert run.status == SyncRun.Status.FAILED
    assert "127.0.0.1" in run.error, run.error
    assert sorted(Document.objects.filter(collection=private_collection).values_list("pk", "sha256")) == kept

    git_source = git_remote(private_collection, git_http_server, tmp_path).source
    git_source.target = "git"
    actions.do_save_source(git_source, credentials=Credentials(git_http_server.username, "wrong-git-token-123"))
    run = run_inline(git_source)
    assert run.status == SyncRun.Status.FAILED
    assert "wrong-git-token-123" not in run.error

    bucket = f"creds-{free_port()}"
    s3_source = s3_remote(private_collection, s3_server, bucket).source
    s3_source.target = "s3"
    actions.do_save_source(s3_source, credentials=Credentials(s3_server.access_key, "WRONGwrongWRONGwrong1234"))
    run = run_inline(s3_source)
    assert run.status == SyncRun.Status.FAILED
    assert "WRONGwrongWRONGwrong1234" not in run.error
    assert sorted(Document.objects.filter(collection=private_collection).values_list("pk", "sha256")) == kept


def test_a_bucket_that_vanishes_mid_sync_removes_nothing(private_collection, s3_server, monkeypatch):
    bucket = f"vanish-{free_port()}"
    remote = s3_remote(private_collection, s3_server, bucket)
    assert run_inline(remote.source).counts["added"] == 4
    kept = sorted(Document.objects.filter(collection=private_collection).values_list("pk", "sha256"))
    remote.change({"travel.md": SECOND["travel.md"], "leave.md": "# Leave\n\nThirty days now.\n"})

    fetch = sync.Syncer._fetch

    def vanish_then_fetch(self, entry):
        s3_server.delete_bucket(bucket)  # gone after the listing, before the first fetch
        return fetch(self, entry)

    monkeypatch.setattr(sync.Syncer, "_fetch", vanish_then_fetch)
    run = run_inline(remote.source)
    assert run.status == SyncRun.Status.FAILED
    assert bucket in run.error, run.error
    assert sorted(Document.objects.filter(collection=private_collection).values_list("pk", "sha256")) == kept


def test_odd_paths_and_a_submodule_are_refused_file_by_file(private_collection, s3_server, tmp_path, settings):
    bucket = f"odd-{free_port()}"
    server_files = {
        "team/good.md": "# Good\n\nThe library opens at 8:00.\n",
        "team/../escape.md": "# Escape\n\nOutside.\n",
        "team/" + "n" * 300 + ".md": "# Long\n\nA long name.\n",
    }
    s3_server.make_bucket(bucket, server_files)
    source = Source(collection=private_collection, name="odd", kind=Source.Kind.S3, url=s3_server.endpoint_url)
    source.bucket, source.prefix, source.region = bucket, "team", s3_server.region
    actions.do_save_source(source, credentials=Credentials(s3_server.access_key, s3_server.secret_key))
    run = run_inline(source)
    assert run.status == SyncRun.Status.SUCCEEDED, run.error
    reasons = {f["path"]: f["error"] for f in run.failures}
    assert "“..”" in reasons["../escape.md"]
    assert "200 characters" in reasons["n" * 300 + ".md"]
    assert set(Document.objects.filter(collection=private_collection).values_list("rel_path", flat=True)) == {"good.md"}

    settings.SOURCE_ROOTS = [str(tmp_path)]
    settings.SOURCE_WORKDIR = tmp_path / "clones"
    inner = make_git_repo(tmp_path / "inner", {"x.md": "# X\n\nInside.\n"})
    outer = make_git_repo(tmp_path / "outer", {"top.md": "# Top\n\nOutside the submodule.\n"})
    git(outer, "submodule", "add", "--quiet", str(inner), "vendor/inner")
    commit(outer, "submodule")
    repo = Source(collection=private_collection, name="sub", kind=Source.Kind.GIT, url=str(outer), target="repo")
    actions.do_save_source(repo)
    run = run_inline(repo)
    assert run.status == SyncRun.Status.SUCCEEDED, run.error
    assert run.counts["added"] == 2  # top.md and .gitmodules
    assert "submodule" in {f["path"]: f["error"] for f in run.failures}["vendor/inner"]

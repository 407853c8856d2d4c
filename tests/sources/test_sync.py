"""The sync engine (sources/sync.py) on a real server folder: real files, PostgreSQL +
pgvector, the local embedder, ingestion run inline as a worker would run it. Two syncs with
edits, a touch, a rename, a deletion and an addition between them; bad files one by one;
a source that cannot be listed removes nothing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pymupdf
import pytest
from django.core.exceptions import ValidationError

from assistant.retrieval.search import search
from audit.models import Action, Entry
from common.runs import claim
from ingestion.models import IngestionRun
from knowledge.models import Chunk, Document
from sources import actions, crypto, sync
from sources.models import Source, SourceFile, SyncRun
from sources.remotes import Credentials

pytestmark = pytest.mark.usefixtures("media")

BAD = Path(__file__).resolve().parent.parent / "files" / "bad"


@pytest.fixture
def share(settings, tmp_path) -> Path:
    """A folder the portal is allowed to sync (PORTAL_SOURCE_ROOTS)."""
    root = tmp_path / "shares"
    (root / "docs").mkdir(parents=True)
    settings.SOURCE_ROOTS = [str(root)]
    settings.SOURCE_WORKDIR = tmp_path / "work"
    return root / "docs"


def write(folder: Path, rel: str, text: str) -> Path:
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def folder_source(collection, folder: Path, **fields) -> Source:
    source = Source(collection=collection, name=fields.pop("name", "Share"), kind=Source.Kind.FOLDER, url=str(folder))
    for key, value in fields.items():
        setattr(source, key, value)
    return actions.do_save_source(source)


def run_sync(source: Source) -> SyncRun:
    run = SyncRun.objects.create(source=source)
    assert claim(run)
    return sync.execute(run, inline=True)


def documents(collection) -> dict[str, Document]:
    return {d.rel_path: d for d in Document.objects.filter(collection=collection)}


def test_two_syncs_with_edits_renames_and_deletions(alice, private_collection, share):
    write(share, "handbook/travel.md", "# Travel\n\nHotels in Beijing are capped at 600 yuan a night.\n")
    write(share, "handbook/leave.md", "# Leave\n\nEvery employee has 25 days of paid leave a year.\n")
    write(share, "notes/old.md", "# Old\n\nThe cafeteria closes at 14:30 on Fridays.\n")
    write(share, "notes/move-me.md", "# Parking\n\nParking permits are renewed each March.\n")
    touched = write(share, "notes/touched.md", "# Badges\n\nVisitor badges are collected at reception.\n")
    source = folder_source(private_collection, share, target="shared")

    first = run_sync(source)
    assert first.status == SyncRun.Status.SUCCEEDED, first.error
    assert first.counts == {
        "listed": 5, "added": 5, "changed": 0, "unchanged": 0, "renamed": 0, "deleted": 0, "failed": 0
    }  # fmt: skip
    docs = documents(private_collection)
    assert set(docs) == {f"shared/{p}" for p in ("handbook/travel.md", "handbook/leave.md", "notes/old.md",
                                                 "notes/move-me.md", "notes/touched.md")}  # fmt: skip
    assert all(d.status == Document.Status.READY for d in docs.values())
    moved = docs["shared/notes/move-me.md"]
    moved_chunks = sorted(Chunk.objects.filter(document=moved).values_list("pk", flat=True))

    # An unchanged re-scan fetches nothing and queues nothing.
    runs_before = IngestionRun.objects.count()
    again = run_sync(source)
    assert again.counts["unchanged"] == 5
    assert again.counts["listed"] == 5
    assert IngestionRun.objects.count() == runs_before

    write(share, "handbook/travel.md", "# Travel\n\nHotels in Beijing are capped at 750 yuan a night.\n")
    os.utime(touched, (touched.stat().st_atime, touched.stat().st_mtime + 60))  # same content, new mtime
    (share / "notes" / "old.md").unlink()
    (share / "archive").mkdir()
    shutil.move(share / "notes" / "move-me.md", share / "archive" / "parking.md")
    write(share, "handbook/expenses.md", "# Expenses\n\nTaxi receipts must be filed within 30 days.\n")

    second = run_sync(source)
    assert second.status == SyncRun.Status.SUCCEEDED, second.error
    assert second.counts == {
        "listed": 5, "added": 1, "changed": 1, "unchanged": 2, "renamed": 1, "deleted": 1, "failed": 0
    }  # fmt: skip
    docs = documents(private_collection)
    assert "shared/notes/old.md" not in docs
    assert "shared/notes/move-me.md" not in docs
    renamed = docs["shared/archive/parking.md"]
    assert renamed.pk == moved.pk  # the same document: pages and chunks kept, nothing re-embedded
    assert sorted(Chunk.objects.filter(document=renamed).values_list("pk", flat=True)) == moved_chunks
    assert SourceFile.objects.get(document=renamed).path == "archive/parking.md"
    assert Entry.objects.filter(action=Action.DOCUMENT_MOVE, object_id=str(renamed.pk)).exists()
    hits = search(alice, "Beijing hotel cap per night", collection_ids=[private_collection.pk], rerank=False).hits
    assert "750" in hits[0].text
    assert hits[0].rel_path == "shared/handbook/travel.md"
    assert search(alice, "taxi receipts", collection_ids=[private_collection.pk], rerank=False).hits[0].rel_path == (
        "shared/handbook/expenses.md"
    )


def test_bad_files_are_skipped_one_by_one_and_nothing_stored_is_lost(private_collection, share, settings):
    write(share, "good.md", "# Good\n\nThe library opens at 8:00.\n")
    pdf = pymupdf.open()
    pdf.new_page().insert_text((72, 100), "Refunds take 14 days.", fontsize=12)
    pdf.save(share / "policy.pdf")
    source = folder_source(private_collection, share)
    assert run_sync(source).counts["added"] == 2
    policy = documents(private_collection)["policy.pdf"]

    (share / "empty.md").write_bytes(b"")
    write(share, ("n" * 250) + ".md", "# Long\n\ntoo long a name\n")
    settings.MAX_UPLOAD_MB = 1
    (share / "big.txt").write_bytes(b"a" * (2 * 1024 * 1024))
    shutil.copy(BAD / "corrupt.pdf", share / "broken.pdf")
    shutil.copy(BAD / "corrupt.pdf", share / "policy.pdf")  # a new version that is damaged
    (share / "escape").symlink_to("/etc")
    Document.objects.create(
        collection=private_collection, rel_path="uploaded.md", name="uploaded.md", sha256="0" * 64, size=1, mime="x"
    )
    write(share, "uploaded.md", "# Mine\n\nNot from this source.\n")

    run = run_sync(source)
    assert run.status == SyncRun.Status.SUCCEEDED, run.error
    reasons = {failure["path"]: failure["error"] for failure in run.failures}
    assert set(reasons) >= {"empty.md", ("n" * 250) + ".md", "big.txt", "escape", "uploaded.md"}
    assert "upload limit" in reasons["big.txt"]
    assert not reasons["empty.md"].startswith("empty.md:")  # named once, by the run's list
    assert "200 characters" in reasons[("n" * 250) + ".md"]
    assert "outside the folder" in reasons["escape"]
    assert "not from this source" in reasons["uploaded.md"]
    # A damaged new file is stored and its run says why; a damaged change keeps the old version.
    assert documents(private_collection)["broken.pdf"].status == Document.Status.FAILED
    assert "version stored before is kept" in reasons["policy.pdf"]
    policy_after = documents(private_collection)["policy.pdf"]
    assert policy_after.sha256 == policy.sha256
    assert policy_after.status == Document.Status.READY
    assert documents(private_collection)["good.md"].status == Document.Status.READY
    assert Document.objects.filter(collection=private_collection, rel_path="uploaded.md", sha256="0" * 64).exists()


def test_a_source_that_cannot_be_listed_removes_nothing(private_collection, share, settings):
    write(share, "a.md", "# A\n\nAlpha.\n")
    source = folder_source(private_collection, share)
    assert run_sync(source).counts["added"] == 1
    shutil.rmtree(share)
    run = run_sync(source)
    assert run.status == SyncRun.Status.FAILED
    assert "does not exist" in run.error
    assert set(documents(private_collection)) == {"a.md"}

    settings.SOURCE_ROOTS = ["/nonexistent-root"]
    run = run_sync(source)
    assert run.status == SyncRun.Status.FAILED
    assert "PORTAL_SOURCE_ROOTS" in run.error
    assert set(documents(private_collection)) == {"a.md"}


def test_include_and_exclude_globs(private_collection, share):
    write(share, "docs/a.md", "# A\n\nAlpha text.\n")
    write(share, "docs/drafts/b.md", "# B\n\nBeta text.\n")
    write(share, "c.txt", "Gamma text.\n")
    source = folder_source(private_collection, share, include="*.md", exclude="drafts/")
    run = run_sync(source)
    assert run.counts["listed"] == 1
    assert set(documents(private_collection)) == {"docs/a.md"}
    assert sync.selected("x/y.md", ["*.md"], [])
    assert not sync.selected("x/y.md", [], ["x/"])
    assert sync.selected("core/a.md", ["core/**"], [])
    assert not sync.selected("other/a.md", ["core/**"], [])


def test_source_paths_feed_the_path_weights(alice, private_collection, share):
    """The collection's `weights` match the paths that sources give documents."""
    write(share, "chat-logs/2026-11.md", "# Chat\n\nThe release train leaves every second Tuesday at noon.\n")
    write(
        share,
        "core/release.md",
        "# Notes\n\nTrains of releases go out on the second Tuesday of a fortnight, at noon.\n",
    )
    for n, topic in enumerate(("printer toner", "office plants", "fire drills", "coffee beans", "bike racks")):
        write(share, f"misc/{n}.md", f"# Note\n\nA short note about {topic} and nothing else.\n")
    source = folder_source(private_collection, share)
    assert run_sync(source).counts["added"] == 7
    query = "when does the release train leave"
    before = {h.rel_path: h for h in search(alice, query, collection_ids=[private_collection.pk], rerank=False).hits}
    chat, core = "chat-logs/2026-11.md", "core/release.md"
    assert before[chat].score > before[core].score
    private_collection.settings = {
        "weights": [{"pattern": "core/**", "weight": 1.0}, {"pattern": "chat-logs/", "weight": 0.3}]
    }
    private_collection.save(update_fields=["settings"])
    after = {h.rel_path: h for h in search(alice, query, collection_ids=[private_collection.pk], rerank=False).hits}
    assert (after[chat].weight, after[core].weight) == (0.3, 1.0)
    # Final score = s × (1 + w): the chat log's lead shrinks by 1.3 / 2.
    ratio = (after[chat].score / after[core].score) / (before[chat].score / before[core].score)
    assert ratio == pytest.approx(1.3 / 2.0, rel=1e-6)


def test_credentials_are_encrypted_at_rest_and_rotate(private_collection, share, settings):
    source = Source(collection=private_collection, name="S3", kind=Source.Kind.S3, bucket="docs")
    actions.do_save_source(source, credentials=Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRET"))
    source.refresh_from_db()
    assert "wJalrXUtnFEMI" not in source.credentials_token
    assert "AKIDEXAMPLE" not in source.credentials_token
    assert source.credentials().password == "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRET"
    entry = Entry.objects.get(action=Action.SOURCE_CREATE, object_id=str(source.pk))
    assert "wJalrXUtnFEMI" not in str(entry.changes)
    settings.SOURCE_KEYS = ["a new key that is long enough to be a key", settings.SECRET_KEY]
    token = crypto.rotate(source.credentials_token)
    settings.SOURCE_KEYS = ["a new key that is long enough to be a key"]
    assert crypto.decrypt(token).username == "AKIDEXAMPLE"
    with pytest.raises(crypto.CredentialsError):
        crypto.decrypt(source.credentials_token)  # the old key is gone


def test_checks_name_the_field(private_collection, share, settings):
    cases = [
        ({"kind": Source.Kind.FOLDER, "url": "/etc"}, "url"),
        ({"kind": Source.Kind.GIT, "url": "https://bob:hunter22@git.example.com/docs.git"}, "url"),
        ({"kind": Source.Kind.WEBDAV, "url": "ftp://files.example.com/"}, "url"),
        ({"kind": Source.Kind.S3, "bucket": ""}, "bucket"),
        ({"kind": Source.Kind.S3, "bucket": "b", "schedule": "every tuesday"}, "schedule"),
        ({"kind": Source.Kind.S3, "bucket": "b", "schedule": "1m"}, "schedule"),
        ({"kind": Source.Kind.S3, "bucket": "b", "schedule": "0 25 * * *"}, "schedule"),
        ({"kind": Source.Kind.S3, "bucket": "b", "link_template": "https://x/{nope}"}, "link_template"),
        ({"kind": Source.Kind.S3, "bucket": "b", "link_template": "javascript:{path}"}, "link_template"),
        ({"kind": Source.Kind.S3, "bucket": "b", "prefix": "a/../b"}, "prefix"),
    ]
    for fields, field in cases:
        source = Source(collection=private_collection, name="X", **fields)
        with pytest.raises(ValidationError) as raised:
            actions.check_source(source)
        assert field in raised.value.message_dict, (fields, raised.value.message_dict)
    fine = Source(collection=private_collection, name="Y", kind=Source.Kind.S3, bucket="b", schedule="0 3 * * 1-5")
    actions.do_save_source(fine)
    assert fine.next_sync_at is not None
    assert fine.next_sync_at.hour == 3


def test_due_sources_are_started_once(private_collection, share, django_capture_on_commit_callbacks):
    from django.utils import timezone

    from sources.tasks import sync_due

    source = folder_source(private_collection, share, schedule="30m")
    Source.objects.filter(pk=source.pk).update(next_sync_at=timezone.now())
    with django_capture_on_commit_callbacks() as queued:
        assert sync_due() == 1
    assert len(queued) == 1
    run = SyncRun.objects.get(source=source)
    assert run.trigger == SyncRun.Trigger.SCHEDULE
    assert run.status == SyncRun.Status.QUEUED
    source.refresh_from_db()
    assert source.next_sync_at is not None
    assert source.next_sync_at > timezone.now()
    # A second start while one is queued gives the same run back.
    assert actions.do_start_sync(source) == run
    assert sync_due() == 0


def test_citations_link_back_to_the_source(private_collection, share):
    from assistant.api.serializers import CitationOriginSerializer
    from sources.links import file_link, source_of

    write(share, "guide/setup.md", "# Setup\n\nRun the installer twice.\n")
    source = folder_source(
        private_collection,
        share,
        link_template="https://git.example.com/team/docs/src/branch/{branch}/{path}",
        branch="main",
    )
    assert run_sync(source).counts["added"] == 1
    document = documents(private_collection)["guide/setup.md"]
    origin = source_of([document.pk])[document.pk]
    assert origin == {
        "name": "Share",
        "kind": "folder",
        "path": "guide/setup.md",
        "url": "https://git.example.com/team/docs/src/branch/main/guide/setup.md",
    }
    assert CitationOriginSerializer(data=origin).is_valid()
    webdav = Source(kind=Source.Kind.WEBDAV, url="https://dav.example.com/remote.php/dav/files/a/", prefix="Team")
    assert file_link(webdav.location(), "a b/c.md") == "https://dav.example.com/remote.php/dav/files/a/Team/a%20b/c.md"
    assert file_link(Source(kind=Source.Kind.S3, bucket="b").location(), "x.md") == ""


def test_the_command_syncs_inline_and_rotates_keys(private_collection, share, settings):
    from io import StringIO

    from django.core.management import call_command

    write(share, "a.md", "# A\n\nAlpha.\n")
    source = folder_source(private_collection, share)
    out = StringIO()
    call_command("sources", sync=source.pk, inline=True, stdout=out)
    assert "1 added" in out.getvalue()
    actions.do_save_source(source, credentials=Credentials("user", "a-long-password-1"))
    settings.SOURCE_KEYS = ["the next key, long enough to use", settings.SECRET_KEY]
    call_command("sources", rotate_keys=True, stdout=out)
    settings.SOURCE_KEYS = ["the next key, long enough to use"]
    source.refresh_from_db()
    assert source.credentials().password == "a-long-password-1"


def test_sources_may_not_reach_this_machine_or_the_clouds_metadata(private_collection, settings):
    """SSRF: loopback and link-local addresses are refused unless PORTAL_SOURCE_HOSTS lists them."""
    settings.SOURCE_HOSTS = []
    for url in ("http://169.254.169.254/latest/", "http://127.0.0.1:6379/", "http://[::1]/dav/", "http://localhost/"):
        source = Source(collection=private_collection, name="X", kind=Source.Kind.WEBDAV, url=url)
        with pytest.raises(ValidationError) as raised:
            actions.check_source(source)
        assert "PORTAL_SOURCE_HOSTS" in raised.value.message_dict["url"][0], url
    # A name is resolved when the source is synced: localhost.localdomain-style names too.
    source = Source(collection=private_collection, name="Y", kind=Source.Kind.WEBDAV, url="http://ip6-localhost/dav/")
    actions.do_save_source(source)
    run = run_sync(source)
    assert run.status == SyncRun.Status.FAILED
    assert "PORTAL_SOURCE_HOSTS" in run.error or "could not be found" in run.error
    # Private networks are where a team's NAS lives: allowed.
    nas = Source(collection=private_collection, name="NAS", kind=Source.Kind.WEBDAV, url="http://192.168.1.20/dav/")
    actions.check_source(nas)
    # With the setting, only the hosts it lists.
    settings.SOURCE_HOSTS = ["dav.example.com"]
    other = Source(collection=private_collection, name="Z", kind=Source.Kind.WEBDAV, url="http://files.example.com/")
    with pytest.raises(ValidationError):
        actions.check_source(other)
    actions.check_source(Source(collection=private_collection, name="Z", kind="webdav", url="https://dav.example.com/"))

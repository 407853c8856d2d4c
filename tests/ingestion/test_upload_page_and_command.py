from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from knowledge.models import Chunk, Document, IndexedDocument, Role
from sources.models import Source
from tests.conftest import set_role

pytestmark = pytest.mark.usefixtures("media")


def test_it_uploads_from_the_collection_page(client, alice, private_collection):
    client.force_login(alice)
    url = reverse("collection-upload", args=[private_collection.pk])
    files = [
        SimpleUploadedFile("规章.md", "# 规章\n\n第一条。".encode()),
        SimpleUploadedFile("x.bin", bytes(range(256)) * 4),
    ]
    response = client.post(url, {"files": files}, follow=True)
    page = response.content.decode()
    assert "规章.md" in page
    assert "indexing has started" in page
    assert "cannot be indexed" in page
    assert Document.objects.get().rel_path == "规章.md"


def test_it_keeps_viewers_and_strangers_out(client, bob, charlie, team, team_collection):
    url = reverse("collection-upload", args=[team_collection.pk])
    client.force_login(bob)
    assert client.post(url, {"files": [SimpleUploadedFile("a.md", b"# a")]}).status_code == 403
    set_role(team, bob, Role.EDITOR)
    assert client.post(url, {"files": [SimpleUploadedFile("a.md", b"# a")]}).status_code == 302
    client.force_login(charlie)
    assert client.post(url, {"files": [SimpleUploadedFile("b.md", b"# b")]}).status_code == 404
    assert list(Document.objects.values_list("rel_path", flat=True)) == ["a.md"]


@pytest.mark.django_db
def test_the_upload_page_refuses_a_file_over_the_size_limit_and_takes_the_others(
    client, alice, private_collection, settings
):
    settings.MAX_UPLOAD_MB = 1
    client.force_login(alice)
    files = [
        SimpleUploadedFile("big.md", b"# Big\n\n" + b"x" * (1024 * 1024)),
        SimpleUploadedFile("small.md", b"# Small\n\ntext"),
    ]
    page = client.post(reverse("collection-upload", args=[private_collection.pk]), {"files": files}, follow=True)
    assert "“big.md” is larger than the 1 MB upload limit." in page.content.decode()
    assert list(Document.objects.values_list("rel_path", flat=True)) == ["small.md"]


def test_it_syncs_a_folder(db, private_collection, tmp_path, capsys, settings):
    settings.SOURCE_ROOTS = [str(tmp_path)]
    folder = tmp_path / "docs"
    (folder / "policies").mkdir(parents=True)
    (folder / "policies" / "travel.md").write_text("# 差旅\n\n住宿每晚 600 元。", encoding="utf-8")
    (folder / "notes.txt").write_bytes("会议纪要：年会 12 月 14 号。".encode("gbk"))
    (folder / "junk.bin").write_bytes(bytes(range(256)) * 4)
    call_command("ingest", str(folder), collection=private_collection.pk, inline=True)
    assert "3 listed, 2 added, 0 changed, 0 unchanged, 0 renamed, 0 deleted, 1 failed" in capsys.readouterr().out
    assert sorted(Document.objects.values_list("rel_path", "status")) == [
        ("notes.txt", "ready"),
        ("policies/travel.md", "ready"),
    ]
    assert "年会" in Chunk.objects.get(document__rel_path="notes.txt").text
    (folder / "notes.txt").unlink()
    call_command("ingest", str(folder), collection=private_collection.pk, inline=True)
    assert "2 listed, 0 added, 0 changed, 1 unchanged, 0 renamed, 1 deleted, 1 failed" in capsys.readouterr().out
    assert list(Document.objects.values_list("rel_path", flat=True)) == ["policies/travel.md"]
    # The folder is a source of the collection, synced by hand: its tab lists it and its runs.
    source = Source.objects.get(collection=private_collection)
    assert (source.kind, source.name, source.schedule) == ("folder", "docs", "")
    assert source.runs.count() == 2


def test_it_syncs_only_a_folder_under_the_source_roots(db, private_collection, tmp_path, settings):
    settings.SOURCE_ROOTS = [str(tmp_path / "allowed")]
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\ntext", encoding="utf-8")
    with pytest.raises(CommandError, match="is not under a folder that PORTAL_SOURCE_ROOTS allows"):
        call_command("ingest", str(folder), collection=private_collection.pk, inline=True)
    assert not Source.objects.exists()
    assert not Document.objects.exists()


# Changed files are ingested; nothing stored is lost.


@pytest.mark.django_db
def test_a_folder_sync_ingests_a_changed_file_and_keeps_a_document_whose_new_file_is_refused(
    private_collection, tmp_path, capsys, settings
):
    settings.SOURCE_ROOTS = [str(tmp_path)]
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "travel.md").write_text("# 差旅\n\n住宿每晚 600 元。", encoding="utf-8")
    (folder / "leave.md").write_text("# 年假\n\n每年五天。", encoding="utf-8")
    call_command("ingest", str(folder), collection=private_collection.pk, inline=True)
    assert "2 listed, 2 added, 0 changed, 0 unchanged, 0 renamed, 0 deleted, 0 failed" in capsys.readouterr().out

    (folder / "travel.md").write_text("# 差旅\n\n住宿每晚 800 元。", encoding="utf-8")
    (folder / "leave.md").write_bytes(bytes(range(256)) * 4)  # still there, but no longer readable
    call_command("ingest", str(folder), collection=private_collection.pk, inline=True)
    assert "2 listed, 0 added, 1 changed, 0 unchanged, 0 renamed, 0 deleted, 1 failed" in capsys.readouterr().out
    assert "800" in Chunk.objects.get(document__rel_path="travel.md").text
    leave = Document.objects.get(rel_path="leave.md")  # its stored content is kept
    assert leave.status == Document.Status.READY
    assert IndexedDocument.objects.filter(document=leave).exists()

    settings.MAX_UPLOAD_MB = 1
    (folder / "leave.md").write_bytes(b"# big\n\n" + b"x" * (2 * 1024 * 1024))  # over the size limit
    call_command("ingest", str(folder), collection=private_collection.pk, inline=True)
    assert "2 listed, 0 added, 0 changed, 1 unchanged, 0 renamed, 0 deleted, 1 failed" in capsys.readouterr().out
    assert Document.objects.filter(rel_path="leave.md", status=Document.Status.READY).exists()

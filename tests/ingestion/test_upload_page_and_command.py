from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from knowledge.models import Chunk, Document, Role
from tests.conftest import set_role


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


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


def test_it_syncs_a_folder(db, private_collection, tmp_path, capsys):
    folder = tmp_path / "docs"
    (folder / "policies").mkdir(parents=True)
    (folder / "policies" / "travel.md").write_text("# 差旅\n\n住宿每晚 600 元。", encoding="utf-8")
    (folder / "notes.txt").write_bytes("会议纪要：年会 12 月 14 号。".encode("gbk"))
    (folder / "junk.bin").write_bytes(bytes(range(256)) * 4)
    call_command("ingest", str(folder), collection=private_collection.pk, inline=True)
    assert "2 queued, 0 unchanged, 1 failed, 0 removed" in capsys.readouterr().out
    assert sorted(Document.objects.values_list("rel_path", "status")) == [
        ("notes.txt", "ready"),
        ("policies/travel.md", "ready"),
    ]
    assert "年会" in Chunk.objects.get(document__rel_path="notes.txt").text
    (folder / "notes.txt").unlink()
    call_command("ingest", str(folder), collection=private_collection.pk, inline=True)
    assert "0 queued, 1 unchanged, 1 failed, 1 removed" in capsys.readouterr().out
    assert list(Document.objects.values_list("rel_path", flat=True)) == ["policies/travel.md"]

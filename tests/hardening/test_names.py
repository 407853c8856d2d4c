"""Names with nothing visible in them (only U+200B) or holding a bidirectional control
("a\u202egpj.exe" shows as "aexe.jpg") are refused with a message, through every surface
that names something: collections (create, rename), teams, API tokens, sources, and uploaded
documents; nothing is stored. A source's sync skips such a file with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from audit.models import Action, Entry
from common.runs import claim
from knowledge.models import ApiToken, Collection, Document, Team
from sources.actions import do_save_source
from sources.models import Source, SyncRun
from sources.sync import execute
from tests.conftest import token_for
from tests.ingestion.test_documents_api import upload

pytestmark = pytest.mark.usefixtures("media")

INVISIBLE = "\u200b\u200b"
RLO = "a\u202egpj.exe"  # shown as "aexe.jpg"
BAD_NAMES = [
    pytest.param(INVISIBLE, "A name is required.", id="invisible"),
    pytest.param(RLO, "Names cannot contain characters that change the direction of the text.", id="bidi"),
    pytest.param("Notes \u2066x\u2069", "Names cannot contain characters that change the direction", id="isolate"),
]
BAD_FILE_NAMES = [
    pytest.param(RLO + ".md", "(U+202E)", id="bidi"),
    pytest.param("\u200f\u200enotes.md", "(U+200E, U+200F)", id="marks"),
    pytest.param(INVISIBLE, "The file needs a name.", id="invisible"),
    pytest.param(" \u200b ", "The file needs a name.", id="spaces-and-invisible"),
]
MARKDOWN = b"# Title\n\nSome text.\n"


@pytest.fixture
def roots(settings, tmp_path) -> Path:
    """PORTAL_SOURCE_ROOTS: one folder of the test's own, with an empty "handbook" in it."""
    root = tmp_path / "shares"
    (root / "handbook").mkdir(parents=True)
    settings.SOURCE_ROOTS = [str(root)]
    settings.SOURCE_WORKDIR = tmp_path / "work"
    return root


def _text(response) -> str:
    return response.content.decode()


@pytest.mark.parametrize(("name", "message"), BAD_NAMES)
def test_it_refuses_such_a_collection_name_in_the_api(api, alice, private_collection, name, message):
    token_for(api, alice)
    created = api.post("/api/collections/", {"name": name}, format="json")
    assert created.status_code == 400
    assert message in str(created.json())
    renamed = api.patch(f"/api/collections/{private_collection.pk}/", {"name": name}, format="json")
    assert renamed.status_code == 400
    assert message in str(renamed.json())
    assert list(Collection.objects.values_list("name", flat=True)) == ["Alice's notes"]
    assert not Entry.objects.filter(action=Action.COLLECTION_RENAME).exists()


@pytest.mark.parametrize(("name", "message"), BAD_NAMES)
def test_it_refuses_such_a_collection_name_on_the_pages(client, alice, private_collection, name, message):
    client.force_login(alice)
    created = client.post(reverse("collection-create"), {"name": name, "description": ""})
    assert created.status_code == 400
    assert message in _text(created)
    renamed = client.post(reverse("collection-rename", args=[private_collection.pk]), {"name": name})
    assert renamed.status_code == 400
    assert message in _text(renamed)
    assert list(Collection.objects.values_list("name", flat=True)) == ["Alice's notes"]


@pytest.mark.parametrize(("name", "message"), BAD_NAMES)
def test_it_refuses_such_a_team_name_in_the_api_and_on_the_page(api, client, alice, team, name, message):
    token_for(api, alice)
    created = api.post("/api/teams/", {"name": name}, format="json")
    assert created.status_code == 400
    assert message in str(created.json())
    renamed = api.patch(f"/api/teams/{team.pk}/", {"name": name}, format="json")
    assert renamed.status_code == 400
    assert message in str(renamed.json())
    client.force_login(alice)
    page = client.post(reverse("teams"), {"name": name})
    assert page.status_code == 400
    assert message in _text(page)
    assert list(Team.objects.values_list("name", flat=True)) == ["Research"]


@pytest.mark.parametrize(("name", "message"), BAD_NAMES)
def test_it_refuses_such_a_token_name_in_the_api_and_on_the_page(api, client, alice, name, message):
    client.force_login(alice)
    page = client.post(reverse("tokens"), {"name": name})
    assert page.status_code == 400
    assert message in _text(page)
    assert "kp_" not in _text(page)  # no key was made
    api.force_login(alice)
    created = api.post("/api/tokens/", {"name": name}, format="json")
    assert created.status_code == 400
    assert message in str(created.json())
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize(("name", "message"), BAD_NAMES)
def test_it_refuses_such_a_source_name_in_the_api_and_on_the_page(
    api, client, alice, private_collection, roots, name, message
):
    fields = {"name": name, "kind": "folder", "url": str(roots / "handbook")}
    token_for(api, alice)
    created = api.post(reverse("collection-source-list", args=[private_collection.pk]), fields, format="json")
    assert created.status_code == 400
    assert message in " ".join(created.json()["name"])
    client.force_login(alice)
    page = client.post(reverse("collection-sources", args=[private_collection.pk]), {**fields, "enabled": "on"})
    assert page.status_code == 400
    assert message in " ".join(page.context["form"].errors["name"])
    assert not Source.objects.exists()
    source = do_save_source(Source(collection=private_collection, name="Share", kind="folder", url=fields["url"]))
    changed = api.patch(reverse("source-detail", args=[source.pk]), {"name": name}, format="json")
    assert changed.status_code == 400
    assert message in " ".join(changed.json()["name"])
    assert Source.objects.get().name == "Share"


@pytest.mark.parametrize(("name", "message"), BAD_FILE_NAMES)
def test_it_refuses_such_a_document_name_in_the_api(api, alice, private_collection, name, message):
    """The collection page uploads through this API. (Its form without JavaScript posts to a
    page whose files Django's own parser has read, removing such characters, before the
    portal sees the names.)"""
    token_for(api, alice)
    response = upload(api, private_collection.pk, (name, MARKDOWN))
    assert response.status_code == 400
    [result] = response.json()
    assert result["document"] is None
    assert message in result["error"]
    assert not Document.objects.exists()
    assert not Entry.objects.filter(action=Action.DOCUMENT_UPLOAD).exists()


def test_the_collection_pages_upload_refuses_it_too(alice, private_collection):
    """What the page's script sends: the browser session, its CSRF token in a header."""
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(alice)
    assert browser.get(reverse("collection", args=[private_collection.pk])).status_code == 200
    response = browser.post(
        f"/api/collections/{private_collection.pk}/documents/",
        {"files": [SimpleUploadedFile(RLO + ".md", MARKDOWN)]},
        format="multipart",
        HTTP_X_CSRFTOKEN=browser.cookies["csrftoken"].value,
    )
    assert response.status_code == 400
    assert "(U+202E)" in response.json()[0]["error"]
    assert not Document.objects.exists()


def test_a_bidi_control_is_named_and_not_shown_in_the_message(api, alice, private_collection):
    token_for(api, alice)
    [result] = upload(api, private_collection.pk, (RLO + ".md", MARKDOWN)).json()
    assert result["error"] == (
        "“agpj.exe.md”: names cannot contain characters that change the direction of the text (U+202E)."
    )


def test_names_that_only_look_odd_are_still_stored(api, alice, private_collection):
    """Arabic and Hebrew names need no control characters, and control characters that do
    not reorder text are removed as before."""
    token_for(api, alice)
    names = ["تقرير السفر.md", "דוח.md", "bad\x1bna\x07me.md", "\u200bzero-width-inside.md"]
    response = upload(api, private_collection.pk, *[(name, MARKDOWN) for name in names])
    assert response.status_code == 201, response.json()
    assert all(not result["error"] for result in response.json())
    assert set(Document.objects.values_list("rel_path", flat=True)) == {
        "تقرير السفر.md",
        "דוח.md",
        "badname.md",
        "zero-width-inside.md",
    }


def test_a_sync_skips_such_a_file_with_the_reason_and_takes_the_others(private_collection, roots):
    folder = roots / "handbook"
    for name in (RLO + ".md", "good.md"):
        (folder / name).write_bytes(MARKDOWN)
    (folder / "docs").mkdir()
    (folder / "docs" / INVISIBLE).write_bytes(MARKDOWN)
    source = do_save_source(Source(collection=private_collection, name="Share", kind="folder", url=str(folder)))
    run = SyncRun.objects.create(source=source)
    assert claim(run)
    run = execute(run, inline=True)
    assert run.status == SyncRun.Status.SUCCEEDED, run.error
    reasons = {failure["path"]: failure["error"] for failure in run.failures}
    assert set(reasons) == {RLO + ".md", f"docs/{INVISIBLE}"}
    assert "change the direction of the text (U+202E)" in reasons[RLO + ".md"]
    assert reasons[f"docs/{INVISIBLE}"] == "The file needs a name."
    assert run.counts["failed"] == 2
    assert list(Document.objects.values_list("rel_path", flat=True)) == ["good.md"]


def test_a_folder_sync_from_the_command_skips_such_a_file_too(private_collection, tmp_path: Path, settings, capsys):
    folder = tmp_path / "folder"  # beside the test's media folder, not above it
    folder.mkdir()
    settings.SOURCE_ROOTS = [str(folder)]
    (folder / (RLO + ".md")).write_bytes(MARKDOWN)
    (folder / "good.md").write_bytes(MARKDOWN)
    call_command("ingest", str(folder), collection=private_collection.pk, inline=True)
    skipped = capsys.readouterr().err.splitlines()
    assert len(skipped) == 1
    assert skipped[0].startswith(f"skipped {RLO}.md: ")
    assert "(U+202E)" in skipped[0]
    assert list(Document.objects.values_list("rel_path", flat=True)) == ["good.md"]

"""A collection's page: the documents tab (table, per-document actions, uploads) and the
settings tab (index versions, renaming, chunking, deletion), each by role."""

from __future__ import annotations

import pytest
from django.urls import reverse

from ingestion import actions
from ingestion.models import IngestionRun
from knowledge.models import Collection, Document, IndexVersion, Role
from tests.conftest import set_role

pytestmark = pytest.mark.usefixtures("media")


def add(collection: Collection, name: str = "guide.md") -> Document:
    document, _run = actions.do_add_document(collection, name, f"# {name}\n\ntext".encode(), enqueue=False)
    return document


def page_of(client, collection: Collection, tab: str = "collection") -> str:
    response = client.get(reverse(tab, args=[collection.pk]))
    assert response.status_code == 200
    return response.content.decode()


def settings_of(client, collection: Collection) -> str:
    return page_of(client, collection, "collection-settings")


EDITOR_CONTROLS = [
    'id="dropzone"',
    'input id="files"',
    'class="inline rerun"',
    'class="inline delete"',
]


def test_it_gives_the_owner_every_control(client, alice, private_collection):
    document = add(private_collection)
    client.force_login(alice)
    html = page_of(client, private_collection)
    for control in EDITOR_CONTROLS:
        assert control in html, control
    assert f'href="{reverse("document", args=[document.pk])}"' in html
    assert f'href="/api/documents/{document.pk}/original/"' in html
    assert f'data-api="/api/collections/{private_collection.pk}/documents/"' in html
    assert 'id="collection-strings"' in html
    assert "portal/collection.js" in html
    assert "portal/collection.css" in html
    assert 'id="versions"' not in html  # on the settings tab, which the tabs link to
    assert f'href="{reverse("collection-settings", args=[private_collection.pk])}"' in html
    settings = settings_of(client, private_collection)
    for control in ('id="versions"', 'id="reindex"', 'id="collection-settings"', 'id="rename-heading"'):
        assert control in settings, control
    assert reverse("collection-delete", args=[private_collection.pk]) in settings
    assert 'table id="documents"' not in settings


def test_it_shows_viewers_the_table_without_changing_controls(client, bob, team_collection):
    document = add(team_collection)
    client.force_login(bob)
    html = page_of(client, team_collection)
    assert 'table id="documents"' in html
    assert f'id="document-{document.pk}"' in html
    assert f'href="/api/documents/{document.pk}/original/"' in html  # reading includes the original
    for control in EDITOR_CONTROLS:
        assert control not in html, control
    assert reverse("collection-settings", args=[team_collection.pk]) not in html  # no settings tab
    assert reverse("collection-sources", args=[team_collection.pk]) not in html
    assert reverse("collection-golden", args=[team_collection.pk]) in html
    assert client.get(reverse("collection-settings", args=[team_collection.pk])).status_code == 403


def test_it_shows_editors_versions_but_not_the_admin_buttons(client, bob, team, team_collection):
    add(team_collection)
    set_role(team, bob, Role.EDITOR)
    client.force_login(bob)
    html = page_of(client, team_collection)
    for control in EDITOR_CONTROLS:
        assert control in html, control
    assert reverse("collection-sources", args=[team_collection.pk]) not in html  # sources: admins only
    settings = settings_of(client, team_collection)
    assert 'id="versions"' in settings
    assert 'id="rename-heading"' in settings
    assert 'id="reindex"' not in settings
    assert "Only the owner or a team admin" in settings
    assert 'id="collection-settings"' not in settings
    assert reverse("collection-delete", args=[team_collection.pk]) not in settings


def test_it_shows_an_empty_state(client, alice, private_collection):
    client.force_login(alice)
    assert "No documents yet. Upload files above to start." in page_of(client, private_collection)
    assert "No index version yet" in settings_of(client, private_collection)


def test_it_lists_versions_with_build_progress(client, alice, private_collection):
    first, second = add(private_collection, "a.md"), add(private_collection, "b.md")
    active = IndexVersion.objects.create(
        collection=private_collection, number=1, embedder_id="e", dims=3, config_hash="x", status="active"
    )
    Collection.objects.filter(pk=private_collection.pk).update(active_version=active)
    IndexVersion.objects.create(
        collection=private_collection, number=2, embedder_id="e", dims=3, config_hash="y", status="retired"
    )
    building = IndexVersion.objects.create(
        collection=private_collection, number=3, embedder_id="e", dims=3, config_hash="z"
    )
    for document, status in ((first, "succeeded"), (second, "running")):
        IngestionRun.objects.create(
            collection=private_collection, document=document, index_version=building, kind="reindex", status=status
        )
    client.force_login(alice)
    html = settings_of(client, private_collection)
    assert 'data-version="3" data-status="building"' in html
    assert 'value="50"' in html
    assert "1 of 2 documents" in html
    assert 'data-version="1" data-status="active" class="active-version"' in html
    activate = reverse("collection-version-activate", args=[private_collection.pk, 2])
    assert f'data-url="{activate}"' in html
    assert reverse("collection-version-activate", args=[private_collection.pk, 3]) not in html
    assert f'data-rollback="{reverse("collection-rollback", args=[private_collection.pk])}"' in html


@pytest.mark.parametrize("tab", ["collection", "collection-settings"])
def test_it_reads_each_tab_in_a_fixed_number_of_queries(
    client, alice, private_collection, django_assert_max_num_queries, tab
):
    for number in range(12):
        add(private_collection, f"doc{number}.md")
    for number in range(1, 6):
        IndexVersion.objects.create(
            collection=private_collection, number=number, embedder_id="e", dims=3, config_hash=str(number)
        )
    client.force_login(alice)
    with django_assert_max_num_queries(12):
        page_of(client, private_collection, tab)


def test_it_reruns_a_document_for_editors_only(client, alice, bob, charlie, team, team_collection):
    document = add(team_collection)
    url = reverse("document-rerun", args=[document.pk])
    runs = IngestionRun.objects.filter(document=document)
    client.force_login(charlie)
    assert client.post(url).status_code == 404
    client.force_login(bob)
    assert client.post(url).status_code == 403
    assert runs.count() == 1
    set_role(team, bob, Role.EDITOR)
    response = client.post(url, follow=True)
    assert response.redirect_chain[-1][0] == reverse("collection", args=[team_collection.pk])
    assert "is already being indexed" in response.content.decode()  # its first run is queued
    runs.update(status="failed")
    assert "is being indexed again" in client.post(url, follow=True).content.decode()
    assert runs.count() == 2
    assert client.get(url).status_code == 405


def test_it_deletes_a_document_for_editors_only(client, alice, bob, charlie, team, team_collection):
    document = add(team_collection)
    url = reverse("document-delete", args=[document.pk])
    client.force_login(charlie)
    assert client.post(url).status_code == 404
    client.force_login(bob)
    assert client.post(url).status_code == 403
    assert Document.objects.filter(pk=document.pk).exists()
    client.force_login(alice)
    response = client.post(url, follow=True)
    assert "“guide.md” deleted." in response.content.decode()
    assert not Document.objects.filter(pk=document.pk).exists()


def test_it_saves_settings_and_keeps_other_keys(client, alice, private_collection):
    Collection.objects.filter(pk=private_collection.pk).update(settings={"custom": 1})
    client.force_login(alice)
    url = reverse("collection-settings", args=[private_collection.pk])
    data = {"chunk_size": "600", "chunk_overlap": "80", "page_summaries": "on", "weights": "core/** 1\nchat-logs/ 0.3"}
    assert client.post(url, data).status_code == 302
    private_collection.refresh_from_db()
    assert private_collection.settings == {
        "custom": 1,
        "chunk_size": 600,
        "chunk_overlap": 80,
        "page_summaries": True,
        "weights": [{"pattern": "core/**", "weight": 1.0}, {"pattern": "chat-logs/", "weight": 0.3}],
    }
    html = settings_of(client, private_collection)
    assert "chat-logs/ 0.3" in html
    assert 'value="600"' in html
    # The evaluation gate's allowance: kept when given, the portal's default when emptied.
    assert client.post(url, {**data, "gate_points": "5"}).status_code == 302
    private_collection.refresh_from_db()
    assert private_collection.settings["gate_points"] == 5.0
    assert client.post(url, {**data, "gate_points": ""}).status_code == 302
    private_collection.refresh_from_db()
    assert "gate_points" not in private_collection.settings


def test_it_explains_bad_settings(client, alice, private_collection):
    client.force_login(alice)
    url = reverse("collection-settings", args=[private_collection.pk])
    response = client.post(url, {"chunk_size": "100", "chunk_overlap": "60", "weights": "core/ 2"})
    html = response.content.decode()
    assert response.status_code == 400
    assert "less than half the chunk size" in html
    assert "Line 1: write a path pattern" in html
    private_collection.refresh_from_db()
    assert private_collection.settings == {}


def test_it_lets_only_owners_and_team_admins_change_settings(client, bob, charlie, team, team_collection):
    url = reverse("collection-settings", args=[team_collection.pk])
    data = {"chunk_size": "600", "chunk_overlap": "80"}
    client.force_login(charlie)
    assert client.post(url, data).status_code == 404
    set_role(team, bob, Role.EDITOR)
    client.force_login(bob)
    assert client.post(url, data).status_code == 403
    team_collection.refresh_from_db()
    assert team_collection.settings == {}


def test_it_still_uploads_without_javascript(client, alice, private_collection):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(alice)
    html = page_of(client, private_collection)
    assert f'action="{reverse("collection-upload", args=[private_collection.pk])}"' in html
    assert 'enctype="multipart/form-data"' in html
    files = [SimpleUploadedFile("a.md", b"# A"), SimpleUploadedFile("b.md", b"# B")]
    response = client.post(reverse("collection-upload", args=[private_collection.pk]), {"files": files}, follow=True)
    assert "“b.md” uploaded; indexing has started." in response.content.decode()
    assert Document.objects.filter(collection=private_collection).count() == 2

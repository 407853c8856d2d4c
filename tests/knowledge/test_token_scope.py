"""API tokens limited to reading and to chosen collections: what such a token may do through
the REST API (the websockets and MCP share the same check, knowledge.api.authentication), how
it is made on the tokens page and the API, and what the audit log says."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from audit.models import Action, Entry
from knowledge import actions
from knowledge.models import ApiToken, Collection
from tests.conftest import make_collection
from tests.ingestion.files import ingest

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]


def use(api, key: str) -> None:
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")


def test_a_read_only_token_reads_searches_and_never_writes(api, alice, private_collection):
    _token, key = actions.do_create_token(alice, "reader", read_only=True)
    use(api, key)
    assert api.get("/api/collections/").status_code == 200
    assert api.post("/api/search/", {"query": "leave"}).status_code == 200
    upload = api.post(
        f"/api/collections/{private_collection.pk}/documents/",
        {"files": [SimpleUploadedFile("a.md", b"# a\n\ntext")]},
        format="multipart",
    )
    assert upload.status_code == 403
    assert "read-only" in upload.json()["detail"]
    assert api.post("/api/collections/", {"name": "New"}).status_code == 403
    assert api.delete(f"/api/collections/{private_collection.pk}/").status_code == 403
    assert Collection.objects.filter(pk=private_collection.pk).exists()
    assert not private_collection.documents.exists()


def test_a_token_limited_to_collections_sees_only_those_in_lists_search_and_objects(api, alice, private_collection):
    other = make_collection(alice, "Other notes")
    ingest(private_collection, "leave.md", b"# Leave\n\nTen days of annual leave a year.")
    hidden = ingest(other, "secret.md", b"# Leave plans\n\nThe annual leave plan for the merger.")
    token, key = actions.do_create_token(alice, "one collection", collections=[private_collection])
    use(api, key)
    listed = [row["id"] for row in api.get("/api/collections/").json()["results"]]
    assert listed == [private_collection.pk]
    hits = api.post("/api/search/", {"query": "annual leave", "rerank": False}).json()["hits"]
    assert hits
    assert {hit["collection_id"] for hit in hits} == {private_collection.pk}
    assert api.get(f"/api/collections/{other.pk}/").status_code == 404
    assert api.get(f"/api/documents/{hidden.pk}/").status_code == 404
    assert api.post("/api/search/", {"query": "leave", "collections": [other.pk]}).status_code == 404
    # Its collection deleted, it sees none (not every collection).
    actions.do_delete_collection(private_collection)
    assert api.get("/api/collections/").json()["results"] == []
    assert ApiToken.objects.get(pk=token.pk).limited


def test_tokens_are_made_with_a_scope_on_the_page_and_in_the_audit_log(client, alice, bob, private_collection):
    client.force_login(alice)
    page = client.get(reverse("tokens"))
    assert "Alice&#x27;s notes" in page.content.decode() or "Alice's notes" in page.content.decode()
    response = client.post(
        reverse("tokens"), {"name": "agent", "read_only": "on", "collections": [private_collection.pk]}
    )
    assert response.status_code == 200
    token = ApiToken.objects.get(name="agent")
    assert (token.read_only, token.limited, list(token.collections.all())) == (True, True, [private_collection])
    text = response.content.decode()
    assert "read only" in text
    entry = Entry.objects.get(action=Action.TOKEN_CREATE, object_id=str(token.pk))
    assert entry.changes == {"read_only": [False, True], "collections": [None, [private_collection.pk]]}
    # A collection alice cannot see is not offered, and not taken.
    bobs = make_collection(bob, "Bob's")
    refused = client.post(reverse("tokens"), {"name": "sneaky", "collections": [bobs.pk]})
    assert refused.status_code == 400
    assert not ApiToken.objects.filter(name="sneaky").exists()
    with pytest.raises(ValidationError):
        actions.do_create_token(alice, "sneaky", collections=[bobs])


def test_the_api_makes_scoped_tokens_and_finds_no_one_elses_collection(api, alice, bob, private_collection):
    api.force_login(alice)
    made = api.post("/api/tokens/", {"name": "ci", "read_only": True, "collections": [private_collection.pk]})
    assert made.status_code == 201, made.json()
    body = made.json()
    assert (body["read_only"], body["collections"]) == (True, [private_collection.pk])
    assert body["key"].startswith("kp_")
    bobs = make_collection(bob, "Bob's")
    assert api.post("/api/tokens/", {"name": "x", "collections": [bobs.pk]}).status_code == 404
    plain = api.post("/api/tokens/", {"name": "all"}).json()
    assert (plain["read_only"], plain["collections"]) == (False, None)

"""Adding links to videos kept elsewhere: POST /api/collections/<id>/links/ and the action;
a link is found by a search of its words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from assistant.retrieval.search import search
from ingestion import actions
from ingestion.parsers.formats import parser_for
from ingestion.sniff import VIDEO_LINK
from knowledge.models import Document, Role
from tests.conftest import set_role, token_for
from tests.ingestion.files import POLICY
from tests.ingestion.runs import drain, run_it

LINK = {"url": "https://videos.example.com/v/42", "title": "Quarterly review", "description": "Budget, travel."}

pytestmark = pytest.mark.usefixtures("media")


def add_link(api, collection_id: int, **fields: str):
    return api.post(f"/api/collections/{collection_id}/links/", {**LINK, **fields}, format="json")


def test_it_lets_only_editors_add_links(api, alice, bob, charlie, team, team_collection):
    token_for(api, charlie)
    assert add_link(api, team_collection.pk).status_code == 404
    token_for(api, bob)  # a viewer
    assert add_link(api, team_collection.pk).status_code == 403
    set_role(team, bob, Role.EDITOR)
    response = add_link(api, team_collection.pk)
    assert response.status_code == 201
    body = response.json()
    assert (body["name"], body["unchanged"], body["error"]) == ("Quarterly review.link", False, "")
    assert body["run"] is not None
    document = Document.objects.get(pk=body["document"], collection=team_collection)
    assert document.mime == VIDEO_LINK
    assert json.loads(document.file.read().decode()) == LINK


def test_it_changes_nothing_when_the_same_link_comes_again(api, alice, private_collection):
    token_for(api, alice)
    first = add_link(api, private_collection.pk).json()
    again = add_link(api, private_collection.pk).json()
    assert (again["document"], again["run"], again["unchanged"]) == (first["document"], None, True)
    moved = add_link(api, private_collection.pk, url="https://videos.example.com/v/43").json()
    assert (moved["document"], moved["unchanged"]) == (first["document"], False)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"url": "ftp://videos.example.com/v/42"}, "http:// or https://"),
        ({"url": "javascript:alert(1)"}, "http:// or https://"),
        ({"url": "https://" + "a" * 2000 + ".example.com/"}, "at most 2000"),
        ({"title": "x" * 151}, "at most 150"),
        ({"description": "x" * 5001}, "at most 5000"),
    ],
)
def test_it_refuses_bad_links_with_a_reason(api, alice, private_collection, fields, message):
    token_for(api, alice)
    response = add_link(api, private_collection.pk, **fields)
    assert response.status_code == 400
    assert message in " ".join(response.json()["detail"])
    assert not Document.objects.filter(collection=private_collection).exists()


def test_it_needs_a_title(api, alice, private_collection):
    token_for(api, alice)
    assert add_link(api, private_collection.pk, title="").status_code == 400
    with pytest.raises(ValidationError, match="title is required"):
        actions.do_add_video_link(private_collection, LINK["url"], "   ", "")


def test_it_stores_a_link_that_its_parser_reads(private_collection):
    document, run = actions.do_add_video_link(
        private_collection, " https://videos.example.com/v/7 ", "Q3 / Q4  回顾", "", enqueue=False
    )
    assert run is not None
    assert (document.name, document.rel_path) == ("Q3 - Q4 回顾.link", "Q3 - Q4 回顾.link")
    (page,) = parser_for(document.mime).pages(Path(document.file.path))
    assert page.meta == {"url": "https://videos.example.com/v/7"}
    assert [block.text for block in page.blocks] == ["Q3 / Q4 回顾", "https://videos.example.com/v/7"]


@pytest.mark.django_db
def test_a_video_link_is_found_by_a_search_of_its_words(alice, private_collection, embedder):
    document, run = actions.do_add_video_link(
        private_collection, "https://videos.example.com/onboarding", "Onboarding 入职培训", "How to file expenses"
    )
    assert run is not None
    run_it(run, embedder)
    actions.do_add_document(private_collection, "notes.md", f"# Notes\n\n{POLICY}".encode(), enqueue=False)
    drain(private_collection)
    for query in ("入职培训", "how do I file my expenses"):
        results = search(alice, query, collection_ids=[private_collection.pk], rerank=False)
        assert results.hits[0].document_id == document.pk, query

from __future__ import annotations

import pytest

from ingestion import actions
from knowledge.models import Role
from tests.conftest import set_role, token_for
from tests.ingestion.runs import drain

pytestmark = pytest.mark.usefixtures("media")


def test_it_reindexes_and_rolls_back_through_the_api(api, alice, bob, team, team_collection):
    actions.do_add_document(team_collection, "a.md", "# A\n\n正文。".encode(), enqueue=False)
    drain()
    base = f"/api/collections/{team_collection.pk}"
    token_for(api, bob)
    assert [v["number"] for v in api.get(f"{base}/versions/").json()["results"]] == [1]
    assert api.post(f"{base}/reindex/").status_code == 403  # viewers and editors may not
    set_role(team, bob, Role.ADMIN)
    started = api.post(f"{base}/reindex/")
    assert started.status_code == 200
    assert started.json()["status"] == "building"
    again = api.post(f"{base}/reindex/")
    assert again.status_code == 400
    assert "already being built" in str(again.json())
    assert api.post(f"{base}/versions/2/activate/").status_code == 400  # still building
    drain()
    statuses = {v["number"]: v["status"] for v in api.get(f"{base}/versions/").json()["results"]}
    assert statuses == {1: "retired", 2: "active"}
    back = api.post(f"{base}/rollback/")
    assert back.json()["number"] == 1
    assert api.post(f"{base}/versions/2/activate/").json()["status"] == "active"
    assert api.post(f"{base}/versions/9/activate/").status_code == 404

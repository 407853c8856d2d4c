"""Every kind of background run in the admin: the same columns in each run admin, and one
list of all of them, filtered for staff by the collections they may see."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from common.run_admin import RUN_COLUMNS
from ingestion import actions
from ingestion.models import IngestionRun
from knowledge.models import IndexVersion, Role
from quality.models import EvaluationRun
from sources.models import Source, SyncRun
from tests.conftest import make_user, set_role

pytestmark = pytest.mark.usefixtures("media")


def runs_of(collection, name: str) -> dict[str, Any]:
    _document, ingest = actions.do_add_document(collection, name, b"# Notes\n\ntext", enqueue=False)
    source = Source.objects.create(collection=collection, name=f"{name} share", kind=Source.Kind.FOLDER)
    sync = SyncRun.objects.create(source=source, status=SyncRun.Status.FAILED, error="gone")
    version = IndexVersion.objects.create(collection=collection, number=4, embedder_id="e", dims=3, config_hash="x")
    evaluation = EvaluationRun.objects.create(
        collection=collection,
        version=version,
        version_number=4,
        status=EvaluationRun.Status.RUNNING,
        progress=3,
        total=8,
    )
    return {"ingestion": ingest, "sync": sync, "evaluation": evaluation}


def listed(html: str) -> list[tuple[str, str]]:
    return re.findall(r'<tr data-kind="(\w+)" data-status="(\w+)">', html)


def test_every_run_admin_starts_with_the_same_columns(admin_client):
    from django.contrib import admin

    for model in (IngestionRun, SyncRun, EvaluationRun):
        model_admin = admin.site._registry[model]
        assert list(model_admin.list_display[: len(RUN_COLUMNS)]) == RUN_COLUMNS, model
        response = admin_client.get(reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist"))
        assert response.status_code == 200, model


def test_a_superuser_sees_every_kind_of_run_in_one_list(admin_client, private_collection):
    made = runs_of(private_collection, "notes.md")
    index = admin_client.get(reverse("admin:index")).content.decode()
    assert reverse("admin-runs") in index
    html = admin_client.get(reverse("admin-runs")).content.decode()
    assert sorted(listed(html)) == [("evaluation", "running"), ("ingestion", "queued"), ("sync", "failed")]
    assert "3/8" in html
    for kind, run in made.items():
        meta = type(run)._meta
        assert reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[run.pk]) in html, kind
        assert (
            admin_client.get(reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[run.pk])).status_code
            == 200
        )


def test_staff_see_the_runs_of_the_collections_their_run_admins_show(client, private_collection, team, team_collection):
    runs_of(private_collection, "alice-private.md")  # alice's own: never shown to dana
    runs_of(team_collection, "team.md")
    dana = make_user("dana", is_staff=True)
    client.force_login(dana)
    assert listed(client.get(reverse("admin-runs")).content.decode()) == []
    team.memberships.create(user=dana, role=Role.VIEWER)
    html = client.get(reverse("admin-runs")).content.decode()
    assert sorted(listed(html)) == [("evaluation", "running"), ("ingestion", "queued")]  # syncs: managers only
    assert "alice-private" not in html
    set_role(team, dana, Role.ADMIN)
    assert len(listed(client.get(reverse("admin-runs")).content.decode())) == 3


def test_people_who_are_not_staff_are_sent_to_the_admin_login(client, alice):
    client.force_login(alice)
    response = client.get(reverse("admin-runs"))
    assert response.status_code == 302
    assert reverse("admin:login") in response["Location"]

"""The audit log as people read it: the page (/audit/), the API (/api/audit/, its CSV and
JSON exports), the Django admin, and the entries beat prunes.

alice administers "Research" (bob is a viewer there, promoted where a test says), owns a
private collection and an API token; charlie belongs to nothing of hers."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from audit.log import acting_as, record
from audit.models import Action, Entry
from audit.tasks import prune
from knowledge import actions
from knowledge.audit_access import visible_entries
from knowledge.models import Role
from tests.conftest import make_user, set_role, token_for

PAGE = reverse("audit")
API = reverse("audit-list")


def _body(response) -> str:
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return content.decode()


@pytest.fixture
def history(alice, bob, team, private_collection, team_collection):
    """bob (an editor then) renames the team's collection from 10.0.0.7; alice renames her
    private one and makes a token; bob makes a token of his own."""
    set_role(team, bob, Role.EDITOR)
    with acting_as(bob, "10.0.0.7"):
        actions.do_rename_collection(team_collection, "Team handbook 2026")
    set_role(team, bob, Role.VIEWER)
    actions.do_rename_collection(private_collection, "Alice's diary")
    actions.do_create_token(alice, "alice's integration")
    actions.do_create_token(bob, "bob's script")
    return {"team": team, "private": private_collection, "shared": team_collection}


def _name(label: str) -> str:
    """An object's label less a token's key prefix: "alice's integration (AbC…)"."""
    return label.split(" (")[0]


def _labels(user) -> set[str]:
    return {_name(label) for label in visible_entries(user).values_list("object_label", flat=True)}


def test_a_team_admin_reads_the_teams_entries_and_her_own(alice, history):
    entries = visible_entries(alice)
    team = history["team"]
    assert set(entries.filter(team_id=team.pk).values_list("action", flat=True)) == {
        Action.TEAM_CREATE,
        Action.MEMBER_ADD,
        Action.COLLECTION_CREATE,
        Action.COLLECTION_RENAME,
    }
    renamed = entries.get(action=Action.COLLECTION_RENAME, team_id=team.pk)
    assert (renamed.actor_label, renamed.ip) == ("bob@example.com", "10.0.0.7")  # someone else's action
    assert {"Alice's diary", "alice's integration"} <= _labels(alice)
    assert "bob's script" not in _labels(alice)
    times = list(entries.values_list("at", flat=True))
    assert times == sorted(times, reverse=True)


@pytest.mark.parametrize("role", [Role.VIEWER, Role.EDITOR])
def test_a_viewer_or_editor_reads_none_of_the_teams_entries(client, bob, history, role):
    set_role(history["team"], bob, role)
    assert not visible_entries(bob).filter(team_id=history["team"].pk).exists()
    assert _labels(bob) == {"bob's script"}
    client.force_login(bob)
    page = _body(client.get(PAGE))
    assert "bob&#x27;s script" in page
    for secret in ("Team handbook", "Alice&#x27;s", "alice&#x27;s integration", "10.0.0.7"):
        assert secret not in page


def test_a_stranger_reads_only_his_own(client, api, charlie, history):
    actions.do_create_token(charlie, "charlie's key")
    assert _labels(charlie) == {"charlie's key"}
    client.force_login(charlie)
    page = _body(client.get(PAGE))
    assert "charlie&#x27;s key" in page
    assert "Research" not in page
    assert "alice" not in page
    token_for(api, charlie)
    assert [_name(e["object_label"]) for e in api.get(API).json()["results"]] == ["tests", "charlie's key"]


def test_a_personal_collections_entries_are_its_owners(alice, bob, history):
    private = history["private"]
    own = visible_entries(alice).filter(collection_id=private.pk)
    assert list(own.values_list("action", flat=True)) == [Action.COLLECTION_RENAME, Action.COLLECTION_CREATE]
    assert own[0].changes["name"] == ["Alice's notes", "Alice's diary"]
    assert not visible_entries(bob).filter(collection_id=private.pk).exists()


def test_a_team_admin_reads_the_entries_left_by_a_deleted_collection(alice, history):
    shared = history["shared"]
    collection_id = shared.pk
    actions.do_delete_collection(shared)
    deleted = visible_entries(alice).filter(collection_id=collection_id)
    assert list(deleted.values_list("action", flat=True)) == [
        Action.COLLECTION_DELETE,
        Action.COLLECTION_RENAME,
        Action.COLLECTION_CREATE,
    ]


def test_anonymous_callers_are_sent_to_log_in(client, api, history):
    response = client.get(PAGE)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    assert api.get(API).status_code == 401
    assert api.get(API, {"export": "csv"}).status_code == 401


def test_the_page_shows_each_entry(client, alice, history):
    client.force_login(alice)
    response = client.get(PAGE)
    assert response.status_code == 200
    page = _body(response)
    assert "bob@example.com" in page
    assert "10.0.0.7" in page
    assert "Collection renamed" in page
    assert "name: Team handbook → Team handbook 2026" in page
    assert "the portal" in page  # the entries recorded without a request or actor: test setup
    assert 'href="/audit/"' in page  # in the menu


def test_a_long_hash_is_shown_clipped_and_kept_whole_for_copying(client, alice, private_collection):
    """A SHA-256 among the changes is shown as its first characters, with the whole value in a
    tooltip and in the page's text; a value of ordinary words is shown as it is."""
    before, after = "a" * 64, "0123456789abcdef" * 4
    with acting_as(alice, "10.0.0.8"):
        record(
            Action.COLLECTION_RENAME,
            private_collection,
            owner_id=alice.pk,
            changes={"sha256": (before, after), "name": ("Old notes", "New notes")},
        )
    client.force_login(alice)
    page = _body(client.get(PAGE))
    assert f'<span class="clipped" title="{before}">{before}</span>' in page
    assert f'<span class="clipped" title="{after}">{after}</span>' in page
    assert "name: Old notes → New notes" in page


def test_the_page_and_api_filter(client, api, alice, bob, history):
    team, shared, private = history["team"], history["shared"], history["private"]
    client.force_login(alice)
    token_for(api, alice)

    def labels(**filters) -> list[str]:
        response = api.get(API, filters)
        assert response.status_code == 200, response.json()
        page = client.get(PAGE, filters)
        assert page.status_code == 200
        found = [e["object_label"] for e in response.json()["results"]]
        for label in found:
            assert label.replace("'", "&#x27;") in _body(page)
        return [_name(label) for label in found]

    assert set(labels(team=team.pk)) == {
        _name(label) for label in Entry.objects.filter(team_id=team.pk).values_list("object_label", flat=True)
    }
    assert labels(collection=private.pk) == ["Alice's diary", "Alice's notes"]
    assert labels(collection=shared.pk, action="collection.rename") == ["Team handbook 2026"]
    assert labels(actor="BOB@") == ["Team handbook 2026"]
    assert labels(action="token.create") == ["tests", "alice's integration"]

    old = Entry.objects.get(action=Action.TOKEN_CREATE, object_label__startswith="alice's integration")
    Entry.objects.filter(pk=old.pk).update(at=timezone.now() - timedelta(days=10))
    day = (timezone.now() - timedelta(days=10)).date()
    assert labels(action="token.create", until=day.isoformat()) == ["alice's integration"]
    assert labels(action="token.create", since=day.isoformat(), until=day.isoformat()) == ["alice's integration"]
    assert labels(action="token.create", since=(day + timedelta(days=1)).isoformat()) == ["tests"]


def test_a_team_filter_names_only_a_team_the_caller_administers(client, api, alice, bob, history):
    """bob's team (he is a viewer) and a team that does not exist read alike: invalid."""
    token_for(api, bob)
    client.force_login(bob)
    for team_id in (history["team"].pk, 999_999, "abc", 2**70):
        assert api.get(API, {"team": team_id}).status_code == 400
        response = client.get(PAGE, {"team": team_id})
        assert response.status_code == 400
        assert "Team handbook" not in _body(response)
    client.force_login(alice)
    assert f'<option value="{history["team"].pk}">Research</option>' in _body(client.get(PAGE))
    bad_filters = [
        {"action": "nope"},
        {"since": "yesterday"},
        {"until": "03/12/2026"},
        {"collection": 0},
        {"export": "xml"},
        {"actor": "a\x00"},
        {"export": "csv", "offset": "null"},  # ignored by an export, but still checked
    ]
    for bad in bad_filters:
        token_for(api, alice)
        assert api.get(API, bad).status_code == 400, bad


def test_the_page_and_api_are_paged(client, api, alice):
    for number in range(120):
        record(Action.TOKEN_CREATE, object_type="apitoken", object_id=number, label=f"key {number}", owner_id=alice.pk)
    client.force_login(alice)
    first = client.get(PAGE)
    assert first.context["page"].paginator.count == 120
    assert len(first.context["rows"]) == 50
    assert "key 119" in _body(first)
    assert "key 69" not in _body(first)
    last = client.get(PAGE, {"page": 3, "action": "token.create"})
    assert [row.entry.object_label for row in last.context["rows"]] == [f"key {n}" for n in range(19, -1, -1)]
    assert "action=token.create&amp;page=2" in _body(last)

    token_for(api, alice)  # one entry more: 121
    response = api.get(API, {"limit": 20, "offset": 101, "action": "token.create"}).json()
    assert response["count"] == 121
    assert [e["object_label"] for e in response["results"]] == [f"key {n}" for n in range(19, -1, -1)]
    assert len(api.get(API).json()["results"]) == 50


def test_the_csv_export_has_every_filtered_entry(api, alice, history):
    for number in range(60):  # more than a page
        record(
            Action.MEMORY_PURGE,
            object_type="memory",
            label=f"=cmd|' /C calc'!A{number}" if number == 0 else f"记忆 {number}",
            owner_id=alice.pk,
            changes={"memories": (number, 0)},
            ip="2001:db8::1",
        )
    token_for(api, alice)
    response = api.get(API, {"export": "csv", "action": "memory.purge", "limit": 5})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="audit-')
    rows = list(csv.DictReader(io.StringIO(_body(response))))
    assert len(rows) == 60
    assert list(rows[0]) == [
        "id",
        "at",
        "actor",
        "action",
        "action_label",
        "object_type",
        "object_id",
        "object_label",
        "team_id",
        "collection_id",
        "changes",
        "ip",
    ]
    newest, oldest = rows[0], rows[-1]
    assert newest["object_label"] == "记忆 59"
    assert newest["action"] == "memory.purge"
    assert newest["action_label"] == "Memories deleted"
    assert json.loads(newest["changes"]) == {"memories": [59, 0]}
    assert (newest["ip"], newest["team_id"], newest["actor"]) == ("2001:db8::1", "", "")
    assert oldest["object_label"] == "'=cmd|' /C calc'!A0"  # never a formula in a spreadsheet

    everything = list(csv.DictReader(io.StringIO(_body(api.get(API, {"export": "csv"})))))
    assert len(everything) == visible_entries(alice).count()
    assert "Team handbook 2026" in {row["object_label"] for row in everything}


def test_the_json_export_is_an_array_of_every_filtered_entry(api, alice, bob, history):
    for number in range(55):
        record(Action.TOKEN_REVOKE, object_type="apitoken", object_id=number, label=f"k{number}", owner_id=alice.pk)
    token_for(api, alice)
    response = api.get(API, {"export": "json", "action": "token.revoke"})
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    entries = json.loads(_body(response))
    assert [e["object_label"] for e in entries] == [f"k{n}" for n in range(54, -1, -1)]
    page = api.get(API, {"action": "token.revoke"}).json()["results"]
    assert entries[:50] == page  # the same fields as the paged list

    token_for(api, bob)  # bob exports only his own
    mine = json.loads(_body(api.get(API, {"export": "json"})))
    assert {_name(e["object_label"]) for e in mine} == {"bob's script", "tests"}


def test_a_session_reads_the_api_and_a_token_does_not_open_the_page(client, api, alice, history):
    client.force_login(alice)
    assert client.get(API).status_code == 200
    assert client.get(API, {"export": "csv"}).status_code == 200
    key = token_for(api, alice)
    assert api.get(API).status_code == 200
    client.logout()
    response = client.get(PAGE, HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 302
    actions.do_revoke_token(actions.ApiToken.objects.get(user=alice, name="tests"))
    assert api.get(API).status_code == 401


def test_the_api_reads_only(api, alice, history):
    token_for(api, alice)
    for method in ("post", "put", "patch", "delete"):
        assert getattr(api, method)(API, {}).status_code == 405
    assert Entry.objects.filter(action=Action.COLLECTION_RENAME).count() == 2


def test_the_admin_shows_entries_to_superusers_read_only(admin_client, history):
    entry = Entry.objects.get(action=Action.COLLECTION_RENAME, team_id=history["team"].pk)
    changelist = admin_client.get("/admin/audit/entry/")
    assert changelist.status_code == 200
    assert "Team handbook 2026" in _body(changelist)
    assert admin_client.get("/admin/audit/entry/", {"q": "10.0.0.7"}).context["cl"].result_count == 1
    assert admin_client.get("/admin/audit/entry/", {"action": "token.create"}).context["cl"].result_count == 2
    detail = admin_client.get(f"/admin/audit/entry/{entry.pk}/change/")
    assert detail.status_code == 200
    assert 'name="_save"' not in _body(detail)
    count = Entry.objects.count()
    assert admin_client.get("/admin/audit/entry/add/").status_code == 403
    assert admin_client.post(f"/admin/audit/entry/{entry.pk}/change/", {"object_label": "x"}).status_code == 403
    assert admin_client.post(f"/admin/audit/entry/{entry.pk}/delete/", {"post": "yes"}).status_code == 403
    response = admin_client.post(
        "/admin/audit/entry/", {"action": "delete_selected", "_selected_action": [entry.pk], "post": "yes"}
    )
    assert response.status_code in (200, 302)
    assert Entry.objects.count() == count
    assert Entry.objects.get(pk=entry.pk).object_label == "Team handbook 2026"


def test_the_admin_hides_entries_from_staff_who_are_not_superusers(client, history):
    from django.contrib.auth.models import Permission

    operator = make_user("operator", is_staff=True)
    operator.user_permissions.set(Permission.objects.filter(content_type__app_label="audit"))
    client.force_login(operator)
    assert client.get("/admin/audit/entry/").status_code == 403
    entry = Entry.objects.order_by("pk")[0]
    assert client.get(f"/admin/audit/entry/{entry.pk}/change/").status_code == 403
    assert "/admin/audit/" not in _body(client.get("/admin/"))


def test_prune_deletes_only_entries_older_than_the_setting(settings, alice):
    now = timezone.now()
    ages = {"fresh": 1, "month": 40, "old": 400}
    for label, days in ages.items():
        entry = record(Action.TOKEN_CREATE, object_type="apitoken", label=label, owner_id=alice.pk)
        Entry.objects.filter(pk=entry.pk).update(at=now - timedelta(days=days))

    def left() -> set[str]:
        return set(Entry.objects.values_list("object_label", flat=True))

    settings.AUDIT_DAYS = 0  # kept for ever
    assert prune() == 0
    assert left() == {"fresh", "month", "old"}
    settings.AUDIT_DAYS = 365
    assert prune() == 1
    assert left() == {"fresh", "month"}
    settings.AUDIT_DAYS = 30
    assert prune() == 1
    assert left() == {"fresh"}


def test_beat_prunes_the_audit_log_daily():
    from portal.celery import app

    schedules = {entry["task"]: entry["schedule"] for entry in app.conf.beat_schedule.values()}
    assert schedules["audit.prune"] == 24 * 3600
    assert "audit.prune" in app.tasks


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_daphne_streams_the_exports(live_web, alice):
    """The web process as deployed (ASGI, no kept connection, a statement timeout) reads the
    entries for an export through a database cursor."""
    import urllib.request

    for number in range(1500):  # more than one fetch of the cursor
        record(Action.TOKEN_REVOKE, object_type="apitoken", object_id=number, label=f"k{number}", owner_id=alice.pk)
    _token, key = actions.do_create_token(alice, "export")
    for export in ("csv", "json"):
        request = urllib.request.Request(
            f"http://127.0.0.1:{live_web}{API}?export={export}&action=token.revoke",
            headers={"Authorization": f"Token {key}"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 (our own http:// URL)
            body = response.read().decode()
        labels = (
            [row["object_label"] for row in csv.DictReader(io.StringIO(body))]
            if export == "csv"
            else [entry["object_label"] for entry in json.loads(body)]
        )
        assert labels == [f"k{n}" for n in range(1499, -1, -1)]

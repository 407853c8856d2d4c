"""Sources that cannot be turned against their own credentials, nor fed input that breaks
them (issue 36; folder links are tests/sources/test_folder_links.py):

- credentials belong to the address they were given for: another admin who moves a source
  (kind, scheme, host, port, bucket) does not get its secret sent to the new address, and
  the audit log says the credentials were cleared;
- bad input (malformed addresses, schedules too long or too frequent, branches git would
  take for options) is a 400 naming the field, on the API and on the page, and stores nothing.

Every server listens on 127.0.0.1."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from audit.models import Action, Entry
from common.runs import claim
from knowledge.models import Role
from sources import schedule, sync
from sources.actions import do_save_source
from sources.models import Source, SyncRun
from sources.remotes import Credentials, Location, RemoteError, open_remote
from tests.conftest import set_role, token_for
from tests.sources.servers import (
    WebDavServer,
    git_http_server_fixture,  # noqa: F401 (the git_http_server fixture)
    serve_wsgi,
    webdav_server_fixture,  # noqa: F401 (the webdav_server fixture)
)

pytestmark = pytest.mark.usefixtures("media")

EMPTY_LISTING = b"""<?xml version="1.0" encoding="utf-8"?>
<d:multistatus xmlns:d="DAV:"><d:response><d:href>/dav/</d:href><d:propstat><d:prop>
<d:resourcetype><d:collection/></d:resourcetype></d:prop><d:status>HTTP/1.1 200 OK</d:status>
</d:propstat></d:response></d:multistatus>"""


class Recorder:
    """The "other host": a WebDAV folder with nothing in it that remembers every request's
    Authorization header (None when there was none)."""

    def __init__(self) -> None:
        self.authorizations: list[str | None] = []

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        self.authorizations.append(environ.get("HTTP_AUTHORIZATION"))
        headers = [("Content-Type", 'application/xml; charset="utf-8"'), ("Content-Length", str(len(EMPTY_LISTING)))]
        start_response("207 Multi-Status", headers)
        return [EMPTY_LISTING]


@pytest.fixture
def recorder() -> Iterator[tuple[str, Recorder]]:
    app = Recorder()
    with serve_wsgi(app) as base:
        yield f"{base}/dav/", app


@pytest.fixture
def admins(alice, bob, team, team_collection):
    """alice and bob both administer the team that owns team_collection."""
    set_role(team, bob, Role.ADMIN)
    return team_collection


@pytest.fixture
def named_hosts(settings):
    """PORTAL_SOURCE_HOSTS empty, as in a portal's default: any name may be saved (names are
    resolved only when a source syncs, and these tests sync none of them)."""
    settings.SOURCE_HOSTS = []


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def run_sync(source: Source) -> SyncRun:
    run = SyncRun.objects.create(source=source)
    assert claim(run)
    return sync.execute(run, inline=True)


def add_source(api, user, collection, **fields: Any) -> Source:
    token_for(api, user)
    response = api.post(reverse("collection-source-list", args=[collection.pk]), fields, format="json")
    assert response.status_code == 201, response.content
    return Source.objects.get(pk=response.json()["id"])


def patch(api, user, source: Source, **fields: Any) -> dict[str, Any]:
    token_for(api, user)
    response = api.patch(reverse("source-detail", args=[source.pk]), fields, format="json")
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def credentials_entry(source: Source) -> Entry:
    return Entry.objects.filter(action=Action.SOURCE_UPDATE, object_id=str(source.pk)).latest("pk")


# -- credentials follow no change of address -------------------------------------------------


def test_a_moved_webdav_source_sends_no_credentials_to_the_new_host(api, alice, bob, admins, webdav_server, recorder):
    other_url, other = recorder
    source = add_source(
        api, alice, admins, name="Share", kind="webdav", url=webdav_server.url,
        username=webdav_server.username, password=webdav_server.password,
    )  # fmt: skip
    first = run_sync(source)
    assert first.status == SyncRun.Status.SUCCEEDED, first.error  # the share lets only these credentials in

    body = patch(api, bob, source, url=other_url)
    assert body["has_credentials"] is False
    assert body["credentials_cleared"] is True
    assert "enter them again" in body["credentials_notice"].lower()
    entry = credentials_entry(source)
    assert entry.actor == bob
    assert entry.changes["credentials"] == ["***", "cleared"]
    assert entry.changes["url"] == [webdav_server.url, other_url]
    assert webdav_server.password not in str(entry.changes)

    refused = run_sync(Source.objects.get(pk=source.pk))
    assert refused.status == SyncRun.Status.FAILED
    assert "enter them again" in refused.error
    assert other.authorizations == []  # not even asked anonymously
    assert webdav_server.password not in refused.error

    # Synced without credentials only when someone says so: then nothing is sent.
    body = patch(api, bob, source, clear_credentials=True)
    assert body["credentials_cleared"] is False
    assert body["credentials_notice"] == ""
    anonymous = run_sync(Source.objects.get(pk=source.pk))
    assert anonymous.status == SyncRun.Status.SUCCEEDED, anonymous.error
    assert other.authorizations  # it was asked
    assert set(other.authorizations) == {None}


def test_credentials_sent_with_the_change_are_the_ones_used(api, alice, bob, admins, webdav_server, recorder):
    other_url, other = recorder
    source = add_source(
        api, alice, admins, name="Share", kind="webdav", url=webdav_server.url,
        username=webdav_server.username, password=webdav_server.password,
    )  # fmt: skip
    body = patch(api, bob, source, url=other_url, username="bobs-user", password="bobs-own-password")
    assert body["has_credentials"] is True
    assert body["credentials_cleared"] is False
    assert run_sync(Source.objects.get(pk=source.pk)).status == SyncRun.Status.SUCCEEDED
    assert set(other.authorizations) == {basic("bobs-user", "bobs-own-password")}
    # A password alone with a change of address keeps nothing of the old credentials.
    patch(api, bob, source, url=webdav_server.url, password="only-a-password")
    assert Source.objects.get(pk=source.pk).credentials() == Credentials("", "only-a-password")


def test_a_git_source_turned_into_webdav_loses_its_credentials(api, alice, bob, admins, git_http_server, recorder):
    other_url, other = recorder
    source = add_source(
        api, alice, admins, name="Repo", kind="git", url=f"{git_http_server.url}/handbook.git",
        username=git_http_server.username, password=git_http_server.password,
    )  # fmt: skip
    body = patch(api, bob, source, kind="webdav", url=other_url)
    assert body["credentials_cleared"] is True
    assert credentials_entry(source).changes["credentials"] == ["***", "cleared"]
    assert run_sync(Source.objects.get(pk=source.pk)).status == SyncRun.Status.FAILED
    assert other.authorizations == []


@pytest.mark.parametrize(
    ("change", "cleared"),
    [
        ({"url": "http://files.example.com:9090/dav/"}, True),  # another port
        ({"url": "http://files.example.com/dav/"}, True),  # the default port, 80
        ({"url": "http://files.example.net:8080/dav/"}, True),  # another host
        ({"url": "https://files.example.com:8080/dav/"}, True),  # another scheme
        ({"kind": "webdav"}, True),
        ({"bucket": "other-bucket"}, True),
        ({"url": "http://FILES.example.com:8080/other/"}, False),  # the same host, another path
        ({"region": "eu-west-1", "prefix": "docs"}, False),
    ],
)
@pytest.mark.usefixtures("named_hosts")
def test_which_changes_clear_the_credentials(api, alice, admins, change, cleared):
    source = add_source(
        api, alice, admins, name="Bucket", kind="s3", url="http://files.example.com:8080/dav/", bucket="docs",
        username="AKIDEXAMPLE", password="s3-secret-key-of-alice",
    )  # fmt: skip
    body = patch(api, alice, source, **change)
    assert body["credentials_cleared"] is cleared
    assert body["has_credentials"] is not cleared
    stored = Source.objects.get(pk=source.pk)
    assert bool(stored.credentials_token) is not cleared


@pytest.mark.usefixtures("named_hosts")
def test_a_source_waiting_for_its_credentials_is_not_started_by_the_schedule(
    api, alice, admins, django_capture_on_commit_callbacks
):
    """Each scheduled run would only fail with "enter them again": none is started until
    credentials are entered (or removed on purpose), then the schedule resumes."""
    from sources.tasks import sync_due

    source = add_source(
        api, alice, admins, name="Share", kind="webdav", url="http://files.example.com/dav/", schedule="30m",
        username="alice", password="webdav-secret-of-alice",
    )  # fmt: skip
    assert Source.objects.get(pk=source.pk).next_sync_at is not None
    patch(api, alice, source, url="http://other.example.com/dav/")
    waiting = Source.objects.get(pk=source.pk)
    assert waiting.credentials_cleared
    assert waiting.next_sync_at is None
    Source.objects.filter(pk=source.pk).update(next_sync_at=timezone.now())  # a value left from before
    with django_capture_on_commit_callbacks() as queued:
        assert sync_due() == 0
    assert queued == []
    assert not SyncRun.objects.filter(source=source).exists()
    patch(api, alice, source, username="alice", password="webdav-secret-of-alice")
    resumed = Source.objects.get(pk=source.pk)
    assert not resumed.credentials_cleared
    assert resumed.next_sync_at is not None


def test_the_page_says_the_credentials_were_removed(client, api, alice, bob, admins, webdav_server, recorder):
    other_url, other = recorder
    source = add_source(
        api, alice, admins, name="Share", kind="webdav", url=webdav_server.url,
        username=webdav_server.username, password=webdav_server.password,
    )  # fmt: skip
    client.force_login(bob)
    page = reverse("source", args=[source.pk])
    form = {"name": "Share", "kind": "webdav", "url": other_url, "enabled": "on", "username": "", "password": ""}
    saved = client.post(page, form, follow=True)
    assert saved.status_code == 200
    text = saved.content.decode()
    assert 'data-credentials="cleared"' in text
    assert 'id="credentials-notice"' in text
    assert "the credentials stored for the old one were removed" in text
    assert 'name="clear_credentials"' in text  # to go without them on purpose
    assert credentials_entry(source).changes["credentials"] == ["***", "cleared"]
    assert run_sync(Source.objects.get(pk=source.pk)).status == SyncRun.Status.FAILED
    assert other.authorizations == []


# -- bad input: a 400 naming the field, and nothing stored -------------------------------------

GIT = {"kind": "git", "url": "https://git.example.com/team/handbook.git"}
S3 = {"kind": "s3", "bucket": "docs"}
BAD = [
    ({"kind": "webdav", "url": "http://[::1"}, "url"),
    ({"kind": "webdav", "url": "http://[127.0.0.1]/"}, "url"),
    ({"kind": "webdav", "url": "http://files.example.com:99999/"}, "url"),
    ({"kind": "webdav", "url": "http://files.example.com:0/"}, "url"),
    ({"kind": "webdav", "url": "http://files.example.com:port/"}, "url"),
    ({"kind": "webdav", "url": "http://files.exa mple.com/"}, "url"),
    ({"kind": "s3", "bucket": "docs", "url": "https://[fd00::1/"}, "url"),
    ({**GIT, "url": "https://[::1/team.git"}, "url"),
    ({**S3, "link_template": "https://[::1/{path}"}, "link_template"),
    ({**S3, "schedule": "999999999d"}, "schedule"),
    ({**S3, "schedule": "99999999999999999999d"}, "schedule"),
    ({**S3, "schedule": "366d"}, "schedule"),
    ({**S3, "schedule": "* * * * *"}, "schedule"),
    ({**S3, "schedule": "0-59 * * * *"}, "schedule"),
    ({**S3, "schedule": "*/2 * * * *"}, "schedule"),
    ({**S3, "schedule": "0,1,2 * * * *"}, "schedule"),
    ({**S3, "schedule": "58,1 * * * *"}, "schedule"),  # 3 minutes across the hour
    ({**GIT, "branch": "--upload-pack=id"}, "branch"),
    ({**GIT, "branch": "-x"}, "branch"),
    ({**GIT, "branch": "main..dev"}, "branch"),
    ({**GIT, "branch": "my branch"}, "branch"),
    ({**GIT, "branch": "a~1"}, "branch"),
    ({**GIT, "branch": "a:b"}, "branch"),
    ({**GIT, "branch": "topic.lock"}, "branch"),
    ({**GIT, "branch": "topic/"}, "branch"),
    ({**GIT, "branch": "main@{1}"}, "branch"),
    ({**GIT, "branch": "a\x01b"}, "branch"),
]


def _ids(case: tuple[dict[str, Any], str]) -> str:
    return repr(list(case[0].values())[-1])  # the value being tried is the last one given


@pytest.mark.usefixtures("named_hosts")
@pytest.mark.parametrize(("fields", "field"), BAD, ids=[_ids(case) for case in BAD])
def test_bad_input_is_a_400_on_the_api_and_stores_nothing(api, alice, private_collection, roots, fields, field):
    token_for(api, alice)
    listing = reverse("collection-source-list", args=[private_collection.pk])
    created = api.post(listing, {"name": "Share", **fields}, format="json")
    assert created.status_code == 400, created.content
    assert set(created.json()) == {field}, created.json()
    assert all(isinstance(message, str) for message in created.json()[field])
    assert not Source.objects.exists()

    source = add_source(api, alice, private_collection, name="Share", kind="s3", bucket="docs", password="keep-me")
    before = Source.objects.filter(pk=source.pk).values().get()
    changed = api.patch(reverse("source-detail", args=[source.pk]), fields, format="json")
    assert changed.status_code == 400, changed.content
    assert set(changed.json()) == {field}, changed.json()
    assert Source.objects.filter(pk=source.pk).values().get() == before
    assert not Entry.objects.filter(action=Action.SOURCE_UPDATE).exists()


@pytest.mark.usefixtures("named_hosts")
@pytest.mark.parametrize(("fields", "field"), BAD, ids=[_ids(case) for case in BAD])
def test_bad_input_is_a_400_on_the_page_and_stores_nothing(client, alice, private_collection, fields, field):
    client.force_login(alice)
    form = {"name": "Share", "enabled": "on", "username": "", "password": "", **fields}
    created = client.post(reverse("collection-sources", args=[private_collection.pk]), form)
    assert created.status_code == 400
    assert set(created.context["form"].errors) == {field}, created.context["form"].errors
    assert not Source.objects.exists()

    source = do_save_source(Source(collection=private_collection, name="Share", kind="s3", bucket="docs"))
    before = Source.objects.filter(pk=source.pk).values().get()
    changed = client.post(reverse("source", args=[source.pk]), form)
    assert changed.status_code == 400
    assert set(changed.context["form"].errors) == {field}, changed.context["form"].errors
    assert Source.objects.filter(pk=source.pk).values().get() == before


@pytest.mark.parametrize("url", ["http://reader:hunter2-Zq9!secret@[::1", "https://reader:hunter2-Zq9!secret@x:99999/"])
def test_a_malformed_address_with_a_password_in_it_is_not_shown_back(api, client, alice, private_collection, url):
    token_for(api, alice)
    response = api.post(
        reverse("collection-source-list", args=[private_collection.pk]),
        {"name": "Share", "kind": "webdav", "url": url},
        format="json",
    )
    assert response.status_code == 400
    assert "hunter2" not in response.content.decode()
    client.force_login(alice)
    form = {"name": "Share", "kind": "webdav", "url": url, "enabled": "on"}
    page = client.post(reverse("collection-sources", args=[private_collection.pk]), form)
    assert page.status_code == 400
    assert "url" in page.context["form"].errors
    assert "hunter2" not in page.content.decode()
    assert not Source.objects.exists()


@pytest.mark.usefixtures("named_hosts")
@pytest.mark.parametrize("value", ["*/5 * * * *", "0,5,10 * * * *", "55 23,0 * * 1", "365d", "5m", "release/1.2"])
def test_values_at_the_limits_are_accepted(api, alice, private_collection, value):
    token_for(api, alice)
    fields = {"branch": value} if "/" in value and " " not in value else {"schedule": value}
    response = api.post(
        reverse("collection-source-list", args=[private_collection.pk]),
        {"name": "Repo", **GIT, **fields},
        format="json",
    )
    assert response.status_code == 201, response.content


def test_the_shortest_gap_of_a_cron_schedule():
    gaps = {
        "*/5 * * * *": 5,
        "58,2 * * * *": 4,  # 58 to 2 of the next hour
        "58,2 9 * * *": 56,  # one hour a day: 2 to 58
        "58,2 23,0 * * *": 4,  # 23:58 to 00:02 of the next day
        "58,2 23,0 * * 1": 56,  # Mondays alone: no Tuesday 00:02 follows Monday 23:58
    }
    for cron, minutes in gaps.items():
        parsed = schedule.parse_cron(cron, datetime.now(UTC))
        assert schedule.shortest_gap(parsed) == timedelta(minutes=minutes), cron
    with pytest.raises(ValidationError):
        schedule.check("58,2 23,0 * * *")
    assert schedule.check("58,2 23,0 * * 1") == "58,2 23,0 * * 1"


def test_a_too_frequent_cron_stored_before_the_rule_runs_at_most_every_5_minutes():
    moment = datetime(2026, 3, 2, 12, 0, 30, tzinfo=UTC)
    assert schedule.next_after("* * * * *", moment) == moment + schedule.SHORTEST
    assert schedule.next_after("0 * * * *", moment) == datetime(2026, 3, 2, 13, 0, tzinfo=UTC)


def test_webdav_server_fixture_is_a_real_share(webdav_server: WebDavServer):
    """The credential tests above rely on the share refusing anyone without its password."""
    remote = open_remote(Location(kind="webdav", url=webdav_server.url), Credentials())
    try:
        with pytest.raises(RemoteError, match="user name and password"):
            list(remote.entries())
    finally:
        remote.close()

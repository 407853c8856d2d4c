"""Signing in is throttled everywhere: the admin's login sends people to allauth's page, whose
`login_failed` limit (5 failures per account in 5 minutes, 10 per address in a minute) is
counted in the shared Redis cache; lockouts are logged and audited once, staff logins are
audited, and a password reset lifts the lockout."""

from __future__ import annotations

import logging
import re

import pytest
from allauth.account.models import EmailAddress
from django.contrib.auth import SESSION_KEY
from django.core import mail
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from audit.models import Action, Entry
from tests.conftest import PASSWORD, make_user

LOCKED = "Too many failed login attempts"
WRONG = "not the password at all"
NEW_PASSWORD = "a fresh and rather longer passphrase 2026"


@pytest.fixture
def ops(db):
    return make_user("ops", is_staff=True, is_superuser=True)


def _login(client: Client, email: str, password: str, ip: str = "127.0.0.1", next_url: str = ""):
    data = {"login": email, "password": password}
    if next_url:
        data["next"] = next_url
    return client.post(reverse("account_login"), data, REMOTE_ADDR=ip)


def _signed_in(client: Client) -> bool:
    return SESSION_KEY in client.session


def _locked_entries():
    return Entry.objects.filter(action=Action.LOGIN_LOCKED).order_by("at", "pk")


def test_failed_logins_are_counted_in_redis(ops, settings):
    """In Redis, not a process's memory: every web process sees the same lockout."""
    import redis

    assert settings.CACHES["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    _login(Client(), "ops@example.com", WRONG)
    server = redis.Redis.from_url(settings.REDIS_URL)
    keys = list(server.scan_iter(match=f"{cache.key_prefix}:*:allauth:rl:allauth.account:login_failed:*"))
    assert len(keys) == 2  # one count per address, one per account


def test_the_admin_login_form_never_authenticates(client, ops):
    for attempt in range(12):
        password = PASSWORD if attempt == 11 else WRONG  # not even the right one, on that form
        response = client.post("/admin/login/?next=/admin/", {"username": "ops@example.com", "password": password})
        assert response.status_code == 302
        assert response["Location"] == "/accounts/login/?next=%2Fadmin%2F"
        assert not _signed_in(client)
    anonymous = client.get("/admin/", follow=True)
    assert anonymous.redirect_chain[-1][0] == "/accounts/login/?next=%2Fadmin%2F"
    assert not _signed_in(client)


def test_the_admin_login_refuses_a_signed_in_user_who_is_not_staff(client, charlie):
    client.force_login(charlie)
    assert client.get("/admin/login/").status_code == 403
    assert client.get("/admin/", follow=True).status_code == 403


def test_a_staff_account_is_locked_after_five_failures(client, ops, caplog):
    caplog.set_level(logging.WARNING, logger="portal.security")
    responses = [_login(client, "ops@example.com", WRONG) for _ in range(12)]
    for response in responses[:5]:
        assert response.status_code == 200
        assert LOCKED not in response.content.decode()
    for response in responses[5:]:
        assert LOCKED in response.content.decode()
    # Locked: the right password is refused too.
    response = _login(client, "ops@example.com", PASSWORD)
    assert LOCKED in response.content.decode()
    assert not _signed_in(client)

    # Seven refusals, one entry, with the address.
    [entry] = _locked_entries()
    assert (entry.object_type, entry.object_id, entry.owner_id) == ("user", str(ops.pk), ops.pk)
    assert entry.object_label == "ops@example.com"
    assert entry.ip == "127.0.0.1"
    assert entry.actor is None
    refusals = [record for record in caplog.records if record.name == "portal.security"]
    assert len(refusals) == 8
    assert all("ops@example.com" in r.getMessage() and "127.0.0.1" in r.getMessage() for r in refusals)
    assert WRONG not in caplog.text
    assert PASSWORD not in caplog.text

    # The same account tried from another address: locked as well, and a second entry for it.
    response = _login(Client(), "ops@example.com", PASSWORD, ip="10.9.9.9")
    assert LOCKED in response.content.decode()
    assert [e.ip for e in _locked_entries()] == ["127.0.0.1", "10.9.9.9"]


def test_the_lockout_is_per_account(client, alice, bob):
    for _ in range(6):
        _login(client, "alice@example.com", WRONG)
    assert LOCKED in _login(client, "alice@example.com", PASSWORD).content.decode()
    # bob, from the same address (7 failures there, under 10 a minute), still comes in.
    other = Client()
    response = _login(other, "bob@example.com", PASSWORD)
    assert response.status_code == 302
    assert _signed_in(other)


def test_the_lockout_is_per_address(db):
    users = [make_user(f"user{n}") for n in range(12)]
    attacker = Client()
    for user in users[:10]:  # one failure each: no account reaches its limit
        response = _login(attacker, user.email, WRONG, ip="10.0.0.2")
        assert LOCKED not in response.content.decode()
    for user in users[10:]:
        response = _login(attacker, user.email, PASSWORD, ip="10.0.0.2")
        assert LOCKED in response.content.decode()
        assert not _signed_in(attacker)
    assert [(e.object_id, e.ip) for e in _locked_entries()] == [(str(u.pk), "10.0.0.2") for u in users[10:]]
    # The accounts are not locked: from another address they sign in.
    elsewhere = Client()
    assert _login(elsewhere, users[10].email, PASSWORD, ip="10.0.0.3").status_code == 302
    assert _signed_in(elsewhere)


def test_made_up_addresses_share_one_entry_per_address(db):
    attacker = Client()
    for n in range(15):
        _login(attacker, f"nobody{n}@example.com", WRONG, ip="10.0.0.4")
    [entry] = _locked_entries()
    assert (entry.object_id, entry.owner_id, entry.ip) == ("", None, "10.0.0.4")
    assert entry.object_label == "nobody10@example.com"


def test_a_staff_login_through_allauth_reaches_the_admin_and_is_audited(client, ops, alice):
    start = client.get("/admin/", follow=True)
    login_url = start.redirect_chain[-1][0]
    assert login_url == "/accounts/login/?next=%2Fadmin%2F"
    response = _login(client, "ops@example.com", PASSWORD, next_url="/admin/")
    assert response.status_code == 302
    assert response["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200

    [entry] = Entry.objects.filter(action=Action.ADMIN_LOGIN)
    assert (entry.actor, entry.object_type, entry.object_id, entry.owner_id) == (ops, "user", str(ops.pk), ops.pk)
    assert entry.ip == "127.0.0.1"
    # Someone who is not staff leaves no such entry.
    _login(Client(), "alice@example.com", PASSWORD)
    assert Entry.objects.filter(action=Action.ADMIN_LOGIN).count() == 1


@pytest.mark.parametrize("address_row", [True, False], ids=["signed-up", "createsuperuser"])
def test_a_password_reset_lifts_the_lockout(client, ops, address_row):
    if address_row:  # accounts that signed up have one; `createsuperuser` makes none
        EmailAddress.objects.create(user=ops, email=ops.email, verified=True, primary=True)
    for _ in range(6):
        _login(client, "ops@example.com", WRONG)
    assert LOCKED in _login(client, "ops@example.com", PASSWORD).content.decode()

    mail.outbox.clear()
    response = client.post(reverse("account_reset_password"), {"email": "ops@example.com"})
    assert response.status_code == 302
    [message] = mail.outbox
    link = re.search(r"https?://[^/\s]+(/accounts/password/reset/key/\S+/)", str(message.body))
    assert link, message.body
    form = client.get(link.group(1), follow=True)
    assert form.status_code == 200
    set_password_url = form.redirect_chain[-1][0]
    done = client.post(set_password_url, {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
    assert done.status_code == 302
    assert done["Location"] == reverse("account_reset_password_from_key_done")

    fresh = Client()
    response = _login(fresh, "ops@example.com", NEW_PASSWORD)
    assert response.status_code == 302, response.content.decode()
    assert _signed_in(fresh)

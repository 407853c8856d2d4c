"""Sign-up never tells whether an address has an account (issue 36, finding 11): a known and
an unknown address get the same answer, the same page and one mail each; the known address's
owner is told by mail, and a new address is confirmed by mail before its account logs in,
whatever PORTAL_EMAIL_VERIFICATION says. Accounts an operator made, and accounts that logged
in before, log in as they did."""

from __future__ import annotations

import re
from typing import Any

import pytest
from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from knowledge import actions
from knowledge.models import Role
from tests.conftest import PASSWORD

NEW_PASSWORD = "a long pass phrase 42"
KNOWN = "alice@example.com"
UNKNOWN = "dora@example.com"
# What differs between two answers of one page and says nothing about the address.
PER_REQUEST = re.compile(r'(csrfmiddlewaretoken" value="|nonce="|csrf-token" content=")[^"]*')


def sign_up(client: Client, email: str, password: str = NEW_PASSWORD) -> Any:
    return client.post(reverse("account_signup"), {"email": email, "password1": password, "password2": password})


def page(response: Any, typed: str) -> str:
    """The page, with what changes per request and the address the person typed left out."""
    return PER_REQUEST.sub(r"\1", response.content.decode()).replace(typed, "ADDRESS")


def mails_to(address: str) -> list[Any]:
    return [message for message in mail.outbox if message.to == [address]]


def confirm_link(message: Any) -> str:
    found = re.search(r"https?://[^/\s]+(/accounts/confirm-email/\S+/)", str(message.body))
    assert found, message.body
    return found.group(1)


def log_in(client: Client, email: str, password: str) -> Any:
    return client.post(reverse("account_login"), {"login": email, "password": password})


def is_logged_in(client: Client) -> bool:
    return client.get(reverse("dashboard")).status_code == 200


@pytest.mark.parametrize("verification", ["none", "optional", "mandatory"])
def test_a_known_and_an_unknown_address_get_the_same_answer(alice, settings, verification):
    settings.ACCOUNT_EMAIL_VERIFICATION = verification
    known, unknown = Client(), Client()
    known_answer, unknown_answer = sign_up(known, KNOWN), sign_up(unknown, UNKNOWN)
    assert known_answer.status_code == unknown_answer.status_code == 302
    assert known_answer["Location"] == unknown_answer["Location"] == reverse("account_email_verification_sent")
    known_page, unknown_page = known.get(known_answer["Location"]), unknown.get(unknown_answer["Location"])
    assert known_page.status_code == unknown_page.status_code == 200
    assert page(known_page, KNOWN) == page(unknown_page, UNKNOWN)
    assert "already registered" not in page(known_page, KNOWN)
    assert len(mails_to(KNOWN)) == len(mails_to(UNKNOWN)) == 1
    assert not is_logged_in(known)
    assert not is_logged_in(unknown)


def test_the_known_addresss_owner_is_told_by_mail_and_nothing_changes(alice):
    password_before = alice.password
    sign_up(Client(), KNOWN)
    [message] = mails_to(KNOWN)
    assert "already exists" in str(message.body)
    assert "/accounts/password/reset/" in str(message.body)
    assert "/accounts/confirm-email/" not in str(message.body)
    assert get_user_model().objects.filter(email__iexact=KNOWN).count() == 1
    alice.refresh_from_db()
    assert alice.password == password_before
    assert not EmailAddress.objects.filter(user=alice).exists()
    assert log_in(Client(), KNOWN, PASSWORD)["Location"] == reverse("dashboard")  # alice is not held up


def test_an_address_differing_only_in_case_is_a_known_one(alice):
    answer = sign_up(Client(), "Alice@Example.COM")
    assert answer["Location"] == reverse("account_email_verification_sent")
    assert get_user_model().objects.filter(email__iexact=KNOWN).count() == 1
    assert "already exists" in str(mail.outbox[0].body)


def test_a_new_account_logs_in_only_once_its_address_is_confirmed(db):
    browser = Client()
    sign_up(browser, UNKNOWN)
    user = get_user_model().objects.get(email=UNKNOWN)
    assert not EmailAddress.objects.get(user=user).verified
    [first] = mails_to(UNKNOWN)
    # The password alone does not let it in: the answer is the "check your mail" page again.
    other = Client()
    refused = log_in(other, UNKNOWN, NEW_PASSWORD)
    assert refused["Location"] == reverse("account_email_verification_sent")
    assert not is_logged_in(other)
    user.refresh_from_db()
    assert user.last_login is None
    # The link from the mail confirms the address and lets the browser that signed up in.
    link = confirm_link(first)
    assert browser.get(link).status_code == 200
    confirmed = browser.post(link)
    assert confirmed.status_code == 302
    assert EmailAddress.objects.get(user=user).verified
    assert is_logged_in(browser)
    # From then on the password is enough, anywhere.
    later = Client()
    assert log_in(later, UNKNOWN, NEW_PASSWORD)["Location"] == reverse("dashboard")
    assert is_logged_in(later)


def test_an_address_claimed_at_sign_up_opens_its_invitations_only_once_confirmed(alice, team):
    invitation = actions.do_invite(team, UNKNOWN, Role.EDITOR, alice)
    browser = Client()
    sign_up(browser, UNKNOWN)
    assert browser.get(reverse("invitations"))["Location"].startswith(reverse("account_login"))
    assert browser.post(reverse("accept-invitation", args=[invitation.pk])).status_code == 302
    invitation.refresh_from_db()
    assert invitation.status == "pending"
    [confirmation] = [m for m in mails_to(UNKNOWN) if "/accounts/confirm-email/" in str(m.body)]
    browser.post(confirm_link(confirmation))
    assert "Research" in browser.get(reverse("invitations")).content.decode()
    browser.post(reverse("accept-invitation", args=[invitation.pk]))
    invitation.refresh_from_db()
    assert invitation.status == "accepted"


def reset_password(email: str, password: str) -> None:
    """allauth's password reset by mail, as its owner does it."""
    browser = Client()
    mail.outbox.clear()
    browser.post(reverse("account_reset_password"), {"email": email})
    [message] = mails_to(email)
    link = re.search(r"https?://[^/\s]+(/accounts/password/reset/key/\S+/)", str(message.body))
    assert link, message.body
    form = browser.get(link.group(1), follow=True)
    done = browser.post(form.redirect_chain[-1][0], {"password1": password, "password2": password})
    assert done["Location"] == reverse("account_reset_password_from_key_done")


def test_someone_elses_address_claimed_at_sign_up_goes_back_to_its_owner(db):
    sign_up(Client(), UNKNOWN, "the squatter's password 7")
    reset_password(UNKNOWN, NEW_PASSWORD)  # the reset came by mail: the mailbox is proven
    assert EmailAddress.objects.get(email=UNKNOWN).verified
    owner = Client()
    assert log_in(owner, UNKNOWN, NEW_PASSWORD)["Location"] == reverse("dashboard")
    assert is_logged_in(owner)
    assert log_in(Client(), UNKNOWN, "the squatter's password 7").status_code == 200  # the form again


def test_an_operator_made_account_that_sets_its_password_by_reset_is_not_held_up(charlie):
    reset_password(charlie.email, NEW_PASSWORD)  # before it ever logged in
    browser = Client()
    assert log_in(browser, charlie.email, NEW_PASSWORD)["Location"] == reverse("dashboard")
    assert is_logged_in(browser)


class CountingHasher(PBKDF2PasswordHasher):
    algorithm = "pbkdf2_counted"
    iterations = 1000
    calls = 0

    def encode(self, password: str, salt: str, iterations: int | None = None) -> str:
        type(self).calls += 1
        return super().encode(password, salt, iterations)


def test_a_known_address_costs_the_same_password_hash_as_a_new_one(alice, settings):
    """Hashing a new account's password is the slow part of a sign-up (about 0.3 s): without
    the same hash for a known address, the answer's time would tell the two apart."""
    settings.PASSWORD_HASHERS = [f"{__name__}.CountingHasher"]
    CountingHasher.calls = 0
    sign_up(Client(), UNKNOWN)
    for_new = CountingHasher.calls
    CountingHasher.calls = 0
    sign_up(Client(), KNOWN)
    assert CountingHasher.calls == for_new >= 1


def test_accounts_an_operator_made_or_that_logged_in_before_are_not_held_up(alice, bob):
    # alice: made without an address row (createsuperuser, the admin, these fixtures).
    # bob: signed up before this rule with an unconfirmed address, and has logged in since.
    EmailAddress.objects.create(user=bob, email=bob.email, verified=False, primary=True)
    type(bob).objects.filter(pk=bob.pk).update(last_login=timezone.now())
    for user in (alice, bob):
        browser = Client()
        assert log_in(browser, user.email, PASSWORD)["Location"] == reverse("dashboard")
        assert is_logged_in(browser)
    assert mail.outbox == []


def test_with_sign_up_closed_nothing_is_sent(alice, settings):
    settings.SIGNUP_ENABLED = False
    for address in (KNOWN, UNKNOWN):
        assert "Sign Up Closed" in sign_up(Client(), address).content.decode()
    assert mail.outbox == []
    assert not get_user_model().objects.filter(email=UNKNOWN).exists()

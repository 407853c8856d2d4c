"""A team admin invites a colleague in a real browser; the colleague accepts on their
Invitations page and only then sees the team's collection."""

from __future__ import annotations

import pytest

from knowledge.models import Membership
from tests.ui.test_portal_flow import log_in

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True)]


def test_an_invited_colleague_joins_only_by_accepting(live_web, page, alice, charlie, team, team_collection, tmp_path):
    base = f"http://127.0.0.1:{live_web}"
    log_in(page, base, "alice@example.com")
    page.goto(f"{base}/teams/{team.pk}/")
    page.fill("input[name=email]", "charlie@example.com")
    page.select_option("#id_role", "editor")
    page.click("button:text('Invite')")
    page.wait_for_selector(".messages")
    assert "Invitation sent to charlie@example.com" in page.inner_text(".messages")
    assert "charlie@example.com" in page.inner_text("table.list >> nth=1")  # pending invitations
    assert not Membership.objects.filter(team=team, user=charlie).exists()
    page.click("button:text('Log out')")

    log_in(page, base, "charlie@example.com")
    assert "Team handbook" not in page.content()  # not a member yet
    page.click("nav a:text('1 invitation')")
    page.wait_for_selector("h1:text('Invitations')")
    assert "Research" in page.inner_text("table.list")
    page.screenshot(path=str(tmp_path / "invitations.png"))
    page.click("button:text('Accept')")
    page.wait_for_selector("h1:text('Research')")
    assert "You joined the team “Research”." in page.inner_text(".messages")
    assert Membership.objects.get(team=team, user=charlie).role == "editor"
    page.goto(f"{base}/")
    assert page.locator("table.list a", has_text="Team handbook").count() == 1
    assert "invitation" not in page.inner_text("nav")

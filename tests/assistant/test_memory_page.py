"""The My memory page (/memory/) and the admin's Purge memories action, on real mem0 with
its pgvector table. mem0 writes through its own connection pool, outside the test's
transaction: each test has fresh users (new UIDs) and forgets their memories afterwards."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from assistant import memory_views
from assistant.memory import service
from tests.conftest import make_user


def remember(user, text: str, *, inferred: bool = False) -> str:
    """A memory stored as it is, without the chat model (mem0 infer=False, as the card
    fallback stores them); its id."""
    metadata: dict[str, object] = {"conversation": None, "message": None}
    if not inferred:
        metadata["inferred"] = False
    added = service.memories()._mem0.add(text, user_id=str(user.uid), metadata=metadata, infer=False)
    return added["results"][0]["id"]


def texts(user) -> list[str]:
    return [item.text for item in service.memories().all(user)]


@pytest.fixture(autouse=True)
def _forgotten(alice, bob):
    yield
    for user in (alice, bob):
        service.forget_user(str(user.uid))


def test_it_sends_anonymous_visitors_to_login(client):
    response = client.get(reverse("my-memory"))
    assert response.status_code == 302
    assert reverse("account_login") in response["Location"]


def test_it_lists_alices_memories_newest_first_and_never_bobs(client, alice, bob):
    remember(alice, "Alice drinks green tea every morning")
    remember(alice, "Alice works in the Berlin office", inferred=True)
    remember(bob, "Bob drinks black tea with milk")
    client.force_login(alice)
    page = client.get(reverse("my-memory")).content.decode()
    assert page.index("Alice works in the Berlin office") < page.index("Alice drinks green tea every morning")
    assert "Bob drinks" not in page
    assert "Inferred" in page
    assert "Question and answer" in page
    assert 'href="/api/memories/export/"' in page
    assert 'href="/memory/"' in page  # the navigation link


def test_it_searches_alices_memories_only(client, alice, bob):
    remember(alice, "Alice drinks green tea every morning")
    remember(alice, "Alice works in the Berlin office")
    remember(bob, "Bob drinks black tea with milk")
    client.force_login(alice)
    page = client.get(reverse("my-memory"), {"q": "tea"}).content.decode()
    assert "Alice drinks green tea every morning" in page
    assert "Bob drinks" not in page
    assert "Berlin" not in page


def test_it_pages_the_list(client, alice, monkeypatch):
    monkeypatch.setattr(memory_views, "PER_PAGE", 2)
    for number in (1, 2, 3):
        remember(alice, f"Memory number {number}")
    client.force_login(alice)
    first = client.get(reverse("my-memory")).content.decode()
    assert "Memory number 3" in first
    assert "Memory number 1" not in first
    assert "?page=2" in first
    second = client.get(reverse("my-memory"), {"page": 2}).content.decode()
    assert "Memory number 1" in second
    assert "Memory number 3" not in second


def test_it_gives_404_for_bobs_memory_and_leaves_it_alone(client, alice, bob):
    bobs = remember(bob, "Bob drinks black tea with milk")
    client.force_login(alice)
    edit = client.post(reverse("my-memory-edit", args=[bobs]), {"text": "Bob drinks nothing"})
    assert edit.status_code == 404
    assert client.post(reverse("my-memory-delete", args=[bobs])).status_code == 404
    assert client.post(reverse("my-memory-delete", args=["not-a-uuid"])).status_code == 404
    assert texts(bob) == ["Bob drinks black tea with milk"]
    assert [change["event"] for change in service.memories().history(bob, bobs)] == ["ADD"]


def test_it_edits_a_memory_and_shows_the_new_text_and_its_history(client, alice):
    memory_id = remember(alice, "Alice drinks green tea")
    client.force_login(alice)
    response = client.post(reverse("my-memory-edit", args=[memory_id]), {"text": "Alice drinks oolong tea"})
    assert response.status_code == 302
    assert response["Location"] == reverse("my-memory")
    page = client.get(response["Location"]).content.decode()
    assert "Memory updated." in page
    assert "Alice drinks oolong tea" in page
    assert "changed “Alice drinks green tea” to “Alice drinks oolong tea”" in page
    assert texts(alice) == ["Alice drinks oolong tea"]


def test_it_shows_why_an_edit_is_refused(client, alice):
    memory_id = remember(alice, "Alice drinks green tea")
    client.force_login(alice)
    blank = client.post(reverse("my-memory-edit", args=[memory_id]), {"text": "   "})
    assert blank.status_code == 400
    assert "This field is required." in blank.content.decode()
    too_long = client.post(reverse("my-memory-edit", args=[memory_id]), {"text": "x" * (service.MAX_TEXT + 1)})
    assert too_long.status_code == 400
    assert "errorlist" in too_long.content.decode()
    assert texts(alice) == ["Alice drinks green tea"]


def test_it_deletes_one_memory_and_comes_back_to_the_search(client, alice):
    memory_id = remember(alice, "Alice drinks green tea")
    remember(alice, "Alice works in the Berlin office")
    client.force_login(alice)
    response = client.post(reverse("my-memory-delete", args=[memory_id]) + "?q=tea")
    assert response["Location"] == reverse("my-memory") + "?q=tea"
    assert "Memory deleted." in client.get(response["Location"]).content.decode()
    assert texts(alice) == ["Alice works in the Berlin office"]


def test_it_deletes_all_only_after_confirmation(client, alice, bob):
    remember(alice, "Alice drinks green tea")
    remember(alice, "Alice works in the Berlin office")
    remember(bob, "Bob drinks black tea with milk")
    client.force_login(alice)
    unconfirmed = client.post(reverse("my-memory-delete-all"))
    assert unconfirmed.status_code == 400
    assert "Tick the box to confirm." in unconfirmed.content.decode()
    assert len(texts(alice)) == 2
    page = client.post(reverse("my-memory-delete-all"), {"confirm": "on"}, follow=True).content.decode()
    assert "All your memories deleted (2)." in page
    assert "The assistant remembers nothing about you yet." in page
    assert texts(alice) == []
    assert texts(bob) == ["Bob drinks black tea with milk"]


def test_it_says_so_when_memory_is_off(client, alice, settings, monkeypatch):
    monkeypatch.setattr(service, "_service", None)
    settings.MEMORY_ENABLED = False
    client.force_login(alice)
    response = client.get(reverse("my-memory"))
    assert response.status_code == 503
    assert "Memory is not available right now" in response.content.decode()
    assert client.post(reverse("my-memory-delete-all"), {"confirm": "on"}).status_code == 503


def purge(client, *users):
    data = {"action": "purge_memories", "_selected_action": [str(user.pk) for user in users]}
    return client.post("/admin/portal/user/", data, follow=True)


def test_it_purges_the_selected_users_memories_from_the_admin(client, alice, bob):
    remember(alice, "Alice drinks green tea")
    remember(alice, "Alice works in the Berlin office")
    remember(bob, "Bob drinks black tea with milk")
    client.force_login(make_user("root", is_superuser=True, is_staff=True))
    assert "Deleted 2 memories of 1 user(s)." in purge(client, alice).content.decode()
    assert texts(alice) == []
    assert texts(bob) == ["Bob drinks black tea with milk"]


def test_it_offers_the_purge_only_to_staff_who_may_change_users(client, bob):
    remember(bob, "Bob drinks black tea with milk")
    viewer = make_user("viewer", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename="view_user"))
    client.force_login(viewer)
    listing = client.get("/admin/portal/user/")
    assert listing.status_code == 200
    assert "purge_memories" not in listing.content.decode()
    purge(client, bob)
    assert texts(bob) == ["Bob drinks black tea with milk"]

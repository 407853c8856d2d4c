"""A collection admin keeps a server folder in step, in a real browser (Debian's Chromium
through Playwright) against real daphne, a real Celery worker, PostgreSQL and Redis: she adds
the source (a path outside PORTAL_SOURCE_ROOTS first, refused on its field), syncs it and
watches the run end on the page without reloading it (sources.js over the collection's
websocket), changes the folder and syncs again, on a socket that connects only after the run
has ended (a slow connection: its events are lost), to see what changed and which file was
skipped and why. A stored password never comes back in a page, and people who do not manage
the collection cannot open its sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge.models import Collection
from sources.actions import do_save_source
from sources.models import Source, SyncRun
from sources.remotes import Credentials
from tests.stack import wait_for
from tests.ui.test_portal_flow import log_in

pytestmark = [pytest.mark.stack, pytest.mark.usefixtures("media"), pytest.mark.django_db(transaction=True)]

FILES = {
    "travel.md": "# Travel\n\nHotels in Beijing are capped at 600 yuan a night.\n",
    "leave.md": "# Leave\n\nEvery employee has 25 days of paid leave a year.\n",
    "parking.md": "# Parking\n\nParking permits are renewed each March.\n",
}
DAV_PASSWORD = "dav-Pa55word-never-shown-91"
# A socket opened only once the test lets it (sessionStorage "hold-socket" gone), as on a slow
# connection: the events sent before it joins the collection's group never reach the page.
HELD_SOCKET = """(() => {
    if (!sessionStorage.getItem('hold-socket')) return;
    const Real = window.WebSocket;
    window.WebSocket = function (url) {
        const shim = new EventTarget();
        const wait = setInterval(() => {
            if (sessionStorage.getItem('hold-socket')) return;
            clearInterval(wait);
            const real = new Real(url);
            real.addEventListener('open', () => shim.dispatchEvent(new Event('open')));
            real.addEventListener('message', (e) => shim.dispatchEvent(new MessageEvent('message', {data: e.data})));
            real.addEventListener('close', (e) => shim.dispatchEvent(new CloseEvent('close', {code: e.code})));
        }, 50);
        return shim;
    };
})();"""


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """The folder to sync, under PORTAL_SOURCE_ROOTS, set before daphne and the worker start
    (they read it from the environment)."""
    root = tmp_path / "shares"
    share = root / "handbook"
    share.mkdir(parents=True)
    for name, text in FILES.items():
        (share / name).write_text(text)
    monkeypatch.setenv("PORTAL_SOURCE_ROOTS", str(root))
    monkeypatch.setenv("PORTAL_SOURCE_WORKDIR", str(tmp_path / "clones"))
    return share


@pytest.fixture
def stack(folder, request) -> int:
    """daphne's port, with a worker beside it, both started after `folder` set their settings."""
    port: int = request.getfixturevalue("live_web")
    request.getfixturevalue("live_worker")
    return port


def ended_run(page, number: int) -> str:
    """The text of the runs table once `number` runs are shown and none is still going: the
    page reloads itself when a run ends (sources.js), so this waits on the page alone. The
    row that sources.js marks ended in place, just before it reloads, still holds its progress
    bar: only the reloaded page, drawn by the server, counts, or the rows read next could be
    read while the page is being replaced."""
    page.wait_for_function(
        """(number) => {
            const rows = document.querySelectorAll('#sync-runs tr[data-run]');
            return document.readyState === 'complete' && rows.length === number
                && [...rows].every((row) => ['succeeded', 'failed'].includes(row.dataset.status)
                    && row.querySelector('progress') === null);
        }""",
        arg=number,
        timeout=45_000,
    )
    return str(page.inner_text("#sync-runs"))


def ended(run: SyncRun) -> bool:
    run.refresh_from_db()
    return run.status in (SyncRun.Status.SUCCEEDED, SyncRun.Status.FAILED)


def counts(page, run_id: int) -> dict[str, str]:
    cells = page.locator(f"#run-{run_id} td[data-count]")
    return {
        str(cells.nth(i).get_attribute("data-count")): cells.nth(i).inner_text().strip() for i in range(cells.count())
    }


def test_an_admin_adds_a_folder_source_and_watches_it_sync(
    stack, folder, page, alice, bob, charlie, private_collection, team_collection, tmp_path
):
    base = f"http://127.0.0.1:{stack}"
    page.add_init_script(HELD_SOCKET)
    log_in(page, base, "alice@example.com")
    page.goto(f"{base}/collections/{private_collection.pk}/")
    page.click(".subnav a:text('Sources')")
    page.wait_for_selector("h1:text('Sources')")
    assert "No sources yet" in page.inner_text("#sources-page")

    # A folder outside PORTAL_SOURCE_ROOTS: refused, the message on the address's field.
    page.fill("input[name=name]", "Handbook share")
    page.select_option("select[name=kind]", label="Server folder")
    page.fill("input[name=url]", str(folder.parent.parent / "elsewhere"))
    page.click("#sources-page form.stack button[type=submit]")
    page.wait_for_selector(".errorlist")
    url_group = page.locator("input[name=url]").locator("xpath=..")
    assert "not under a folder that PORTAL_SOURCE_ROOTS allows" in url_group.inner_text()
    assert page.input_value("input[name=name]") == "Handbook share"  # what she typed is kept
    assert not Source.objects.exists()

    page.fill("input[name=url]", str(folder))
    page.click("#sources-page form.stack button[type=submit]")
    page.wait_for_selector("#source-page h1:text('Handbook share')")
    assert "Source “Handbook share” added." in page.inner_text(".messages")
    source = Source.objects.get(collection=private_collection)
    assert (source.kind, source.url) == (Source.Kind.FOLDER, str(folder))
    assert "Not synced yet." in page.inner_text("#source-page")

    # Sync now: the run is queued, the worker runs it, the page follows it to its end.
    page.click("button:text('Sync now')")
    page.wait_for_selector("#sync-runs")
    first = ended_run(page, 1)
    run = SyncRun.objects.get(source=source)
    assert run.status == SyncRun.Status.SUCCEEDED, run.error
    assert "Succeeded" in first
    assert counts(page, run.pk) == {
        "added": "3", "changed": "0", "unchanged": "0", "renamed": "0", "deleted": "0", "failed": "0"
    }  # fmt: skip
    assert page.locator("tr.failures").count() == 0

    # One file edited, one deleted, an empty one added; synced again.
    (folder / "travel.md").write_text("# Travel\n\nHotels in Beijing are now capped at 750 yuan a night.\n")
    (folder / "parking.md").unlink()
    (folder / "blank.md").write_bytes(b"")
    # This time the page's socket connects late, after the run has ended: the page, once
    # subscribed, sees that its runs moved and shows the end all the same.
    page.evaluate("sessionStorage.setItem('hold-socket', '1')")
    with page.expect_navigation():
        page.click("button:text('Sync now')")
    latest = SyncRun.objects.filter(source=source).exclude(pk=run.pk).get()
    wait_for(lambda: ended(latest), 45, "the second sync")
    page.evaluate("sessionStorage.removeItem('hold-socket')")
    second = ended_run(page, 2)
    assert latest.status == SyncRun.Status.SUCCEEDED, latest.error
    assert "Succeeded" in second
    assert counts(page, latest.pk) == {
        "added": "0", "changed": "1", "unchanged": "1", "renamed": "0", "deleted": "1", "failed": "1"
    }  # fmt: skip
    skipped = page.locator(f"tr[data-failures-of='{latest.pk}']")
    assert "1 file was skipped" in skipped.inner_text()
    skipped.locator("summary").click()  # the files and reasons open on demand
    reasons = skipped.locator("ul.failed-files").inner_text()
    assert "blank.md" in reasons
    assert "empty" in reasons, reasons
    page.screenshot(path=str(tmp_path / "source-after-second-sync.png"), full_page=True)

    # A WebDAV source with a stored password: the page says credentials are stored, never them.
    dav = Source(collection=private_collection, name="Team share", kind=Source.Kind.WEBDAV)
    dav.url = "https://dav.example.com/remote.php/dav/files/team/"
    do_save_source(dav, credentials=Credentials("dav-user-7", DAV_PASSWORD), actor=alice)
    response = page.goto(f"{base}/sources/{dav.pk}/")
    assert response is not None
    assert response.status == 200
    assert page.locator("[data-credentials=stored]").count() >= 1
    assert page.input_value("input[name=password]") == ""
    assert page.input_value("input[name=username]") == ""
    assert DAV_PASSWORD not in page.content()
    assert DAV_PASSWORD not in response.text()
    assert "dav-user-7" not in page.content()

    # Neither a viewer of the collection's team nor a stranger opens the sources pages.
    assert_shut_out(page, base, private_collection, team_collection, source, bob, charlie)


def assert_shut_out(page, base: str, collection: Collection, shared: Collection, source: Source, bob, charlie) -> None:
    """bob views alice's team collection `shared` but does not manage it (403); charlie sees
    nothing of hers, nor does bob her own collection (404: the source's existence is not
    given away)."""
    browser = page.context.browser
    for user, expected in ((bob, {"shared": 403, "private": 404}), (charlie, {"shared": 404, "private": 404})):
        context = browser.new_context()
        other = context.new_page()
        log_in(other, base, user.email)
        shared_page = other.goto(f"{base}/collections/{shared.pk}/sources/")
        assert shared_page is not None
        assert shared_page.status == expected["shared"], user
        for url in (f"/collections/{collection.pk}/sources/", f"/sources/{source.pk}/"):
            response = other.goto(base + url)
            assert response is not None
            assert response.status == expected["private"], (user, url)
            assert "Handbook share" not in other.content()
        context.close()

"""A collection admin reads the Evaluations page in a real browser: the runs, the plot
across versions (SVG drawn on the server) and a held-back version's comparison, and flips
it anyway; the other quality pages open from the same navigation."""

from __future__ import annotations

import pytest

from audit.models import Action, Entry
from knowledge.models import IndexVersion
from quality.models import EvaluationRun
from tests.ui.test_portal_flow import log_in

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True)]


def overall(hit1: float, hit5: float, mrr: float) -> dict[str, dict[str, float]]:
    return {"overall": {"hit@1": hit1, "hit@3": hit5, "hit@5": hit5, "mrr": mrr, "ndcg@10": mrr, "n": 20.0}}


def versions(collection) -> tuple[IndexVersion, IndexVersion]:
    make = IndexVersion.objects.create
    active = make(collection=collection, number=1, embedder_id="e", dims=4, config_hash="", status="active")
    held = make(collection=collection, number=2, embedder_id="e", dims=4, config_hash="", status="held")
    collection.active_version = active
    collection.save(update_fields=["active_version"])
    return active, held


def test_an_admin_sees_why_a_version_is_held_and_flips_it_anyway(live_web, page, alice, private_collection, tmp_path):
    active, held = versions(private_collection)
    EvaluationRun.objects.create(
        collection=private_collection, version=active, version_number=1, status="succeeded",
        summary={"version": overall(0.60, 0.90, 0.72)}, total=20, progress=20, seconds=3.1,
    )  # fmt: skip
    EvaluationRun.objects.create(
        collection=private_collection, version=held, version_number=2, baseline=active, baseline_number=1,
        purpose="gate", status="succeeded", total=40, progress=40, seconds=6.4, decision="held",
        summary={"version": overall(0.65, 0.80, 0.70), "baseline": overall(0.60, 0.90, 0.72)},
        drops={"hit@1": -5.0, "hit@5": 10.0, "mrr": 2.0},
    )  # fmt: skip
    base = f"http://127.0.0.1:{live_web}"
    log_in(page, base, "alice@example.com")
    page.goto(f"{base}/collections/{private_collection.pk}/")
    page.click(".subnav a:text('Evaluations')")
    page.wait_for_selector("h1:text('Evaluations')")
    held_box = page.inner_text("#held")
    assert "Version 2 is held back" in held_box
    assert "hit@5" in held_box
    assert "10.0" in held_box
    assert page.locator("#held tr.over").count() == 1  # hit@5 fell beyond the 2 points allowed
    assert page.locator("#evaluation-runs tbody tr").count() == 2
    plot = page.request.get(base + str(page.get_attribute("figure.plot img", "src")))
    assert plot.ok
    assert plot.headers["content-type"] == "image/svg+xml"
    page.wait_for_function("() => document.querySelector('figure.plot img').naturalWidth > 0")  # drawn
    page.screenshot(path=str(tmp_path / "evaluations.png"), full_page=True)

    page.click("button:text('Flip to version 2 anyway')")
    page.wait_for_selector(".messages")
    assert "Version 2 now answers questions." in page.inner_text(".messages")
    assert page.locator("#held").count() == 0
    private_collection.refresh_from_db()
    assert private_collection.active_version_id == held.pk
    assert Entry.objects.get(action=Action.INDEX_FLIP_ANYWAY).actor == alice

    for tab, heading in (
        ("Golden questions", "Golden questions"),
        ("Analytics", "Analytics"),
        ("Feedback", "Feedback"),
    ):
        page.click(f".subnav a:text('{tab}')")
        page.wait_for_selector(f"h1:has-text('{heading}')")
        page.screenshot(path=str(tmp_path / f"{tab.split()[0].lower()}.png"), full_page=True)
        if tab == "Analytics":  # the period chosen is the one shown: 30 days unless asked
            assert page.eval_on_selector("#id_days", "select => select.selectedOptions[0].text") == "Last 30 days"

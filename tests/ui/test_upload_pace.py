"""A long upload's row says how fast its pages go and about how long the rest will take, from
the run's progress events, in a real browser against real daphne and a real Celery worker."""

from __future__ import annotations

import re

import pytest

from tests.ingestion.test_recovery import long_pdf
from tests.ui.test_portal_flow import log_in

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True)]


def test_a_long_uploads_row_shows_its_pace_and_time_left(
    live_web, live_worker, page, alice, private_collection, tmp_path
):
    base = f"http://127.0.0.1:{live_web}"
    manual = tmp_path / "manual.pdf"
    manual.write_bytes(long_pdf(120))
    log_in(page, base, "alice@example.com")
    page.goto(f"{base}/collections/{private_collection.pk}/")
    page.set_input_files("input#files", [str(manual)])
    page.click("#upload-form button[type=submit]")
    row = f'.upload-row[data-name="{manual.name}"]'
    page.wait_for_function(
        f"() => (document.querySelector('{row}')?.textContent || '').includes('pages/s')", timeout=180_000
    )
    said = page.text_content(row) or ""
    assert re.search(r"Parsing pages \d+/120 · \d+\.\d pages/s, about \d+ (s|min) left", said), said
    page.wait_for_function(f"() => document.querySelector('{row}')?.dataset.state === 'done'", timeout=300_000)

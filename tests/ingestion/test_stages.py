"""Where an ingestion run's time goes (ingestion.stages): exclusive times that add up to the
run's wall time, recorded on the run, shown on the admin's run page."""

from __future__ import annotations

import time

import pytest

from ingestion.models import IngestionRun
from ingestion.stages import STAGES, current_profile, profiling, stage
from tests.ingestion.files import handbook_pdf
from tests.ingestion.runs import add, run_it

pytestmark = pytest.mark.usefixtures("media")


def test_an_inner_stage_pauses_the_outer_one():
    with profiling() as profile:
        with stage("layout"):
            time.sleep(0.02)
            with stage("ocr"):
                time.sleep(0.05)
            time.sleep(0.02)
        time.sleep(0.01)
        stored = profile.as_json()
    seconds = stored["seconds"]
    assert 0.05 <= seconds["ocr"] < 0.09
    assert 0.04 <= seconds["layout"] < 0.08  # its own 40 ms, not the OCR's 50 inside it
    assert 0.01 <= seconds["other"] < 0.04
    assert stored["counts"] == {"layout": 1, "ocr": 1}
    assert list(seconds) == [name for name in STAGES if name in seconds]


def test_outside_a_profile_stages_record_nothing():
    assert current_profile() is None
    with stage("ocr"):
        pass
    assert current_profile() is None


def test_a_run_records_its_stages_and_slowest_page(db, private_collection, embedder, tmp_path, admin_client):
    started = time.perf_counter()
    _document, run = add(private_collection, "handbook.pdf", handbook_pdf(tmp_path / "h.pdf").read_bytes())
    run_it(run, embedder)
    wall = time.perf_counter() - started
    stored = IngestionRun.objects.get(pk=run.pk).stages
    seconds = stored["seconds"]
    # Page 1 draws a table (detected, then read cell by cell), page 2 is a scan the OCR reads.
    for name in (
        "open",
        "layout",
        "table_detection",
        "table_grid",
        "render",
        "ocr",
        "chunking",
        "embedding",
        "database",
    ):
        assert seconds.get(name, 0) > 0, name
    assert stored["counts"]["table_detection"] == 1  # the scanned page draws nothing: not searched
    assert sum(seconds.values()) <= wall
    number, slowest = stored["slowest_page"]
    assert number in (1, 2)
    assert 0 < slowest <= wall
    page = admin_client.get(f"/admin/ingestion/ingestionrun/{run.pk}/change/").content.decode()
    assert "table detection" in page
    assert "embedding" in page


def test_a_failed_run_keeps_its_profile(db, private_collection, embedder):
    _document, run = add(private_collection, "broken.pdf", b"%PDF-1.4 not really")
    run_it(run, embedder)
    run.refresh_from_db()
    assert run.status == "failed"
    assert "open" in run.stages["seconds"]


def test_a_page_takes_its_share_of_its_batchs_embedding_by_characters(monkeypatch):
    from ingestion.chunking import ChunkDraft
    from ingestion.index import DraftedPage
    from ingestion.pipeline import _Batch

    def slow_write(drafted, _embedder):  # the batch's embedding and writing: 0.4 s
        time.sleep(0.4)
        return len(drafted)

    monkeypatch.setattr("ingestion.pipeline.write_pages", slow_write)

    def drafted(chars: int) -> list[DraftedPage]:
        return [DraftedPage(None, None, [ChunkDraft("text", "x" * chars, 1, None, ())])]  # type: ignore[arg-type]

    from knowledge.models import Page

    batch = _Batch([])  # no versions: nothing is marked searchable (no database here)
    batch.add(Page(number=1), 0.1, drafted(3000))
    batch.add(Page(number=2), 0.3, [])  # kept: nothing to embed
    batch.add(Page(number=3), 0.1, drafted(1000))
    with profiling() as profile:
        recorded: list[tuple[int, float]] = []
        monkeypatch.setattr(profile, "page_done", lambda number, seconds: recorded.append((number, seconds)))
        assert batch.write(object(), profile) == 2  # type: ignore[arg-type]
    times = dict(recorded)
    assert 0.1 + 0.4 * 0.75 <= times[1] < 0.1 + 0.4 * 0.75 + 0.1
    assert times[2] == pytest.approx(0.3)
    assert 0.1 + 0.4 * 0.25 <= times[3] < 0.1 + 0.4 * 0.25 + 0.1
    assert (batch.drafted, batch.pages) == ([], [])

"""Small uploads on a queue of their own (ingestion.runs.quick): a note uploaded while a long
manual is being read becomes searchable before the manual is done, on a worker that takes only
the quick queue, as `manage.py up` starts one."""

from __future__ import annotations

import pytest

from ingestion import actions
from ingestion.models import IngestionRun
from ingestion.runs import QUICK_PAGES, quick
from knowledge.models import Document
from portal.supervisor import QUICK_QUEUE, WORK_QUEUES, worker_command
from tests.ingestion.test_recovery import long_pdf
from tests.stack import process, wait_for

pytestmark = pytest.mark.usefixtures("media")
NOTE = b"# Parking\n\nThe visitor car park is behind building C."


@pytest.mark.django_db
def test_small_documents_of_few_pages_are_quick(private_collection, settings):
    _note, note_run = actions.do_add_document(private_collection, "note.md", NOTE, enqueue=False)
    # 60 pages of text fit in a few kilobytes: small, but not quick.
    _manual, manual_run = actions.do_add_document(private_collection, "manual.pdf", long_pdf(60), enqueue=False)
    _short, short_run = actions.do_add_document(private_collection, "short.pdf", long_pdf(QUICK_PAGES), enqueue=False)
    # A note of many short sections: its sections cost what embedding them costs, so quick too.
    sections = "\n\n".join(f"# Room {n}\n\nBuilding C, floor {n}." for n in range(1, 3 * QUICK_PAGES))
    _rooms, rooms_run = actions.do_add_document(private_collection, "rooms.md", sections.encode(), enqueue=False)
    assert note_run is not None
    assert manual_run is not None
    assert short_run is not None
    assert rooms_run is not None
    assert quick(note_run)
    assert quick(rooms_run)
    assert quick(short_run)
    assert not quick(manual_run)
    settings.QUICK_INGEST_BYTES = len(NOTE) - 1
    assert not quick(note_run)
    settings.QUICK_INGEST_BYTES = 0  # off: every file waits in the ingest queue
    assert not quick(note_run)
    assert QUICK_QUEUE in WORK_QUEUES.split(",")  # any free worker takes small files too


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_a_note_is_searchable_while_a_long_manual_is_read(private_collection, tmp_path):
    ingest_log, quick_log = tmp_path / "ingest.log", tmp_path / "quick.log"
    with (
        process(worker_command("ingest-only@%h", 1, "ingest"), ingest_log),
        process(worker_command("quick-only@%h", 1, QUICK_QUEUE), quick_log),
    ):
        manual, manual_run = actions.do_add_document(private_collection, "manual.pdf", long_pdf(400))
        assert manual_run is not None
        wait_for(
            lambda: IngestionRun.objects.get(pk=manual_run.pk).progress >= 2, 120, "the manual started", ingest_log
        )
        note, _run = actions.do_add_document(private_collection, "note.md", NOTE)
        wait_for(lambda: Document.objects.get(pk=note.pk).status == "ready", 120, "the note indexed", quick_log)
        manual.refresh_from_db()
        assert manual.status == Document.Status.PROCESSING  # still reading the manual (in parts)
        actions.do_cancel_run(manual_run)

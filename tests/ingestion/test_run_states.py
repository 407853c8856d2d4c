"""States that cannot disagree (common.runs.end_run): a run that ingests a whole document is
recorded as succeeded only with its document ready; otherwise both end failed with a reason
a person can act on, and nothing waits on a run that has ended."""

from __future__ import annotations

import pytest

from common import metrics
from common.runs import claim, end_run
from ingestion.models import IngestionRun
from knowledge.models import Document
from tests.conftest import make_collection
from tests.ingestion.runs import CountingEmbedder, add, run_it

pytestmark = pytest.mark.django_db


def _unfinished() -> float:
    return metrics.ERRORS.labels("run", "unfinished")._value.get()


def test_a_run_cannot_succeed_while_its_document_waits(alice):
    collection = make_collection(alice, "Notes")
    document, run = add(collection, "a.md", b"# A\n\nSome text.\n")
    assert claim(run)
    counted = _unfinished()

    end_run(run, IngestionRun.Status.SUCCEEDED, counts={"pages": 0})

    run.refresh_from_db()
    document.refresh_from_db()
    assert run.status == IngestionRun.Status.FAILED
    assert "without making the document ready" in run.error
    assert run.finished_at is not None
    assert document.status == Document.Status.FAILED
    assert document.error == run.error
    assert _unfinished() == counted + 1


def test_a_run_succeeds_with_its_document_ready_or_gone(alice):
    collection = make_collection(alice, "Notes")
    document, run = add(collection, "a.md", b"# A\n\nSome text.\n")
    assert claim(run)
    Document.objects.filter(pk=document.pk).update(status=Document.Status.READY)
    assert end_run(run, IngestionRun.Status.SUCCEEDED)
    assert run.status == IngestionRun.Status.SUCCEEDED
    assert IngestionRun.objects.get(pk=run.pk).status == IngestionRun.Status.SUCCEEDED
    # a failure is recorded as it is, whatever the document says
    _other, failing = add(collection, "b.md", b"# B\n\nMore text.\n")
    assert claim(failing)
    end_run(failing, IngestionRun.Status.FAILED, error="The parser gave up.")
    assert IngestionRun.objects.get(pk=failing.pk).error == "The parser gave up."
    # a run that ended meanwhile is not ended again by a check that found it live
    live = (IngestionRun.Status.QUEUED, IngestionRun.Status.RUNNING)
    assert not end_run(failing, IngestionRun.Status.CANCELLED, error="Stopped.", only_from=live)
    assert IngestionRun.objects.get(pk=failing.pk).status == IngestionRun.Status.FAILED
    assert failing.status == IngestionRun.Status.FAILED


def test_a_document_already_whole_everywhere_is_ready_after_its_run(alice):
    """Nothing to redo (its content is indexed in every version already): the run used to
    end succeeded and leave a document said to be waiting as it was, for ever."""
    collection = make_collection(alice, "Notes")
    document, run = add(collection, "a.md", b"# A\n\nSome text.\n")
    run_it(run, CountingEmbedder())
    Document.objects.filter(pk=document.pk).update(status=Document.Status.PENDING)
    again = IngestionRun.objects.create(collection=collection, document=document, kind=IngestionRun.Kind.INGEST)

    result = run_it(again, CountingEmbedder())

    assert result is not None
    assert result.chunks_written == 0
    assert Document.objects.get(pk=document.pk).status == Document.Status.READY
    assert IngestionRun.objects.get(pk=again.pk).status == IngestionRun.Status.SUCCEEDED

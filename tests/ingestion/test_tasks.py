"""The Celery task that runs an ingestion run: transient model errors are retried with backoff
and the run completes, a permanent one fails the run readably at once, and a run is claimed
once, so that a second message for it does nothing.

Real PostgreSQL + pgvector, the local embedder; fakes only at the embedder's boundary."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from common.runs import claim
from ingestion import actions
from ingestion.models import IngestionRun
from knowledge.models import Document
from providers import registry
from providers.base import ProviderError
from tests.ingestion.files import POLICY
from tests.ingestion.runs import CountingEmbedder

pytestmark = pytest.mark.usefixtures("media")


class FlakyEmbedder(CountingEmbedder):
    """The real local embedder behind a model server that fails its first `failures` calls."""

    def __init__(self, failures: int, *, retryable: bool = True) -> None:
        super().__init__()
        self.failures, self.retryable, self.calls = failures, retryable, 0

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls <= self.failures:
            raise ProviderError("embedding", "local", "the model server is busy", retryable=self.retryable)
        return super().embed_documents(texts)


@pytest.mark.django_db
def test_a_transient_model_error_is_retried_by_the_task_and_the_run_completes(private_collection, monkeypatch):
    from ingestion import tasks

    options = vars(tasks.ingest_document.__class__)  # what @shared_task was given
    assert ProviderError in options["autoretry_for"]
    assert (options["retry_backoff"], options["max_retries"]) == (5, 5)
    flaky = FlakyEmbedder(failures=2)
    monkeypatch.setattr(registry, "text_embedder", lambda: flaky)
    document, run = actions.do_add_document(private_collection, "a.md", f"# A\n\n{POLICY}".encode(), enqueue=False)
    assert run is not None
    # Eagerly applied, a retry runs again at once (a worker waits 5 s, 10 s, ... first).
    tasks.ingest_document.apply(args=(run.pk,))
    run.refresh_from_db()
    assert (run.status, run.error) == (IngestionRun.Status.SUCCEEDED, "")
    assert flaky.calls == 3
    assert Document.objects.get(pk=document.pk).status == Document.Status.READY


@pytest.mark.django_db
def test_a_permanent_model_error_fails_the_run_readably_without_retrying(private_collection, monkeypatch):
    from ingestion import tasks

    flaky = FlakyEmbedder(failures=99, retryable=False)
    monkeypatch.setattr(registry, "text_embedder", lambda: flaky)
    document, run = actions.do_add_document(private_collection, "a.md", f"# A\n\n{POLICY}".encode(), enqueue=False)
    assert run is not None
    tasks.ingest_document.apply(args=(run.pk,))
    run.refresh_from_db()
    assert run.status == IngestionRun.Status.FAILED
    assert "embedding model (local): the model server is busy" in run.error
    assert flaky.calls == 1
    assert Document.objects.get(pk=document.pk).status == Document.Status.FAILED


@pytest.mark.django_db
def test_a_run_is_claimed_once_and_a_second_task_for_it_does_nothing(private_collection, embedder, monkeypatch):
    from ingestion import tasks

    _document, run = actions.do_add_document(private_collection, "a.md", f"# A\n\n{POLICY}".encode(), enqueue=False)
    assert run is not None
    assert claim(run)
    assert not claim(IngestionRun.objects.get(pk=run.pk))  # another worker got the same message
    monkeypatch.setattr(registry, "text_embedder", lambda: embedder)
    assert tasks.ingest_document.apply(args=(run.pk,)).get() is None
    assert embedder.texts == 0
    assert IngestionRun.objects.get(pk=run.pk).status == IngestionRun.Status.RUNNING  # still the first one's

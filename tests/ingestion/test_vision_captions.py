"""Vision captions while ingesting (issue 5, Images): where a vision model is configured, a
picture (an image document, a PDF's figure) is captioned and found by what it shows, next to
what OCR reads in it. The vision model is an OpenAI-compatible API played by a local server
that speaks its wire format; OCR, the embedder, PostgreSQL + pgvector and the pipeline are real."""

from __future__ import annotations

import base64
import io
import logging
from collections.abc import Iterator
from unittest import mock

import pytest

from ingestion.models import IngestionRun
from knowledge.models import Chunk, Document
from providers import registry
from providers.config import RoleConfig
from tests.ingestion.files import png
from tests.ingestion.image_files import text_image
from tests.ingestion.runs import CountingEmbedder, add, run_it
from tests.providers.wire import Reply, Wire, completion, serve

CAPTION = "A bar chart of quarterly travel spending beside a red company logo."
PATH = "/v1/chat/completions"


pytestmark = pytest.mark.usefixtures("media")


@pytest.fixture
def vision(settings) -> Iterator[Wire]:
    """PROVIDER_VISION=openai with BASE_URL_VISION at the local server; the registry forgets
    the models it built before and after, so no other test sees this one."""
    with serve() as wire, mock.patch("providers.retry.pause"):
        config = RoleConfig("vision", "openai", "gpt-4o-mini", f"{wire.url}/v1", "sk-test", timeout=5.0)
        settings.MODEL_ROLES = {**settings.MODEL_ROLES, "vision": config}
        registry.reset()
        try:
            yield wire
        finally:
            registry.reset()


def chunk_text(document: Document) -> str:
    return "\n".join(Chunk.objects.filter(document=document).values_list("text", flat=True))


def sent_images(wire: Wire) -> list[bytes]:
    """The pictures the vision model was sent, decoded from their data URLs."""
    images = []
    for body in wire.bodies(PATH):
        (_prompt, picture) = body["messages"][0]["content"]
        prefix, _comma, data = picture["image_url"]["url"].partition(",")
        assert prefix == "data:image/png;base64"
        images.append(base64.b64decode(data))
    return images


def size_of(image: bytes) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(image)) as opened:
        return opened.size


@pytest.mark.django_db
def test_an_image_is_captioned_and_found_by_its_caption_and_its_words(vision, private_collection):
    vision.on(PATH, Reply(body=completion(CAPTION)))
    document, run = add(private_collection, "spending.png", text_image(["Invoice 2024 total 350 yuan"]))
    assert run_it(run, CountingEmbedder()) is not None
    text = chunk_text(document)
    assert CAPTION in text
    assert "Invoice 2024" in text  # OCR still reads its words
    (sent,) = sent_images(vision)
    assert size_of(sent) == (900, 130)
    (body,) = vision.bodies(PATH)
    assert body["model"] == "gpt-4o-mini"
    assert "Describe this picture" in body["messages"][0]["content"][0]["text"]


@pytest.mark.django_db
def test_a_pdfs_figure_is_captioned_with_the_text_beside_it(vision, private_collection, tmp_path):
    import pymupdf

    vision.on(PATH, Reply(body=completion(CAPTION)))
    pdf = pymupdf.open()
    page = pdf.new_page(width=595, height=842)
    page.insert_text((72, 100), "Spending report", fontsize=18)
    page.insert_image(pymupdf.Rect(72, 140, 372, 365), stream=png(200, 150))
    page.insert_text((72, 385), "Figure 1: travel by quarter", fontsize=10)
    pdf.save(tmp_path / "report.pdf")
    document, run = add(private_collection, "report.pdf", (tmp_path / "report.pdf").read_bytes())
    assert run_it(run, CountingEmbedder()) is not None
    (figure,) = Chunk.objects.filter(document=document, kind="image")
    assert "Figure 1: travel by quarter" in figure.text
    assert CAPTION in figure.text
    (sent,) = sent_images(vision)
    assert size_of(sent) == (200, 150)


@pytest.mark.django_db
def test_a_picture_the_vision_model_refuses_is_indexed_by_its_words_alone(vision, private_collection, caplog):
    vision.on(PATH, Reply(400, {"error": {"message": "image format not supported"}}))
    document, run = add(private_collection, "scan.png", text_image(["Invoice 2024 total 350 yuan"]))
    with caplog.at_level(logging.WARNING, logger="ingestion.enrich"):
        assert run_it(run, CountingEmbedder()) is not None
    run.refresh_from_db()
    document.refresh_from_db()
    assert (run.status, document.status) == (IngestionRun.Status.SUCCEEDED, Document.Status.READY)
    assert "Invoice 2024" in chunk_text(document)
    assert CAPTION not in chunk_text(document)
    assert len(vision.requests) == 1  # refused: not worth asking again
    assert "caption by openai:gpt-4o-mini:en failed" in caplog.text
    assert "vision model (openai): the provider answered 400" in caplog.text
    assert "image format not supported" in caplog.text


@pytest.mark.django_db
def test_a_vision_model_that_is_down_fails_the_run_readably_and_its_retry_adds_the_caption(vision, private_collection):
    """A 500 may pass: the task tries again later (as for the embedder) rather than indexing the
    picture without its caption for good (the page would be kept as it is on later runs)."""
    from ingestion import tasks

    down = Reply(500, {"error": {"message": "overloaded"}})
    vision.on(PATH, down, down, down, Reply(body=completion(CAPTION)))
    embedder = CountingEmbedder()
    document, run = add(private_collection, "chart.png", text_image(["Invoice 2024 total 350 yuan"]))
    with mock.patch.object(registry, "text_embedder", return_value=embedder):
        tasks.ingest_document.apply(args=(run.pk,))  # eagerly applied, the retry runs at once
    run.refresh_from_db()
    assert (run.status, run.error) == (IngestionRun.Status.SUCCEEDED, "")
    assert len(vision.requests) == 4  # three tries by the provider, the fourth by the task's retry
    assert CAPTION in chunk_text(document)

    vision.on(PATH, down)
    _other, run = add(private_collection, "other.png", text_image(["Receipt 88 yuan"]))
    with mock.patch.object(registry, "text_embedder", return_value=embedder):
        tasks.ingest_document.apply(args=(run.pk,))
    run.refresh_from_db()
    assert run.status == IngestionRun.Status.FAILED
    assert run.error.startswith("vision model (openai): the provider answered 500")
    assert "Traceback" not in run.error

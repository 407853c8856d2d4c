"""Log lines at INFO and above say what the answering did with ids and counts, never what
was asked or what a document says (issue 59, row 8); the same lines at DEBUG carry the
content, for whoever turns it on. Each question goes through the real answering path on
real PostgreSQL + pgvector and the local embedder; the chat model is scripted."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from assistant.answering import router
from assistant.answering.events import collect
from assistant.answering.pipeline import answer_events, start
from tests.assistant.test_answering import LEAVE, JudgedChat, ScriptedChat
from tests.conftest import make_collection
from tests.ingestion.files import ingest

pytestmark = pytest.mark.usefixtures("media")

WARRANTY = (
    b"# Switches of the Zanzibarite lab\n\n"
    b"The Heron switch of the Zanzibarite lab has a warranty of five years.\n\n"
    b"The Falcon router of the Zanzibarite lab has a warranty of three years.\n"
)
MODELS_CSV = (
    b"Model,AIC,BIC,zeros\n"
    b"fm_pois,35959.2,36010.4,47\n"
    b"fm_nbin,24359.1,24412.5,608\n"
    b"fm_kestrel,24210.1,31337.9,683\n"
    b"fm_zinb,24211.4,24307.3,683\n"
)


def logged(caplog: pytest.LogCaptureFixture, level: int, ask: Callable[[], Any]) -> tuple[Any, list[logging.LogRecord]]:
    """What `ask` returns, and the records every logger wrote with the root logger at `level`."""
    caplog.clear()
    with caplog.at_level(level):
        result = ask()
    return result, list(caplog.records)


def with_secret(records: list[logging.LogRecord], secrets: tuple[str, ...]) -> list[str]:
    return [record.getMessage() for record in records if any(secret in record.getMessage() for secret in secrets)]


def assert_content_only_at_debug(
    caplog: pytest.LogCaptureFixture, ask: Callable[[], Any], *secrets: str
) -> tuple[Any, list[logging.LogRecord]]:
    """At INFO no record holds a secret; at DEBUG the records at INFO and above still hold none,
    and the DEBUG ones hold every secret. Returns what the DEBUG ask returned, and its records."""
    _, records = logged(caplog, logging.INFO, ask)
    assert with_secret(records, secrets) == []
    result, records = logged(caplog, logging.DEBUG, ask)
    assert with_secret([record for record in records if record.levelno >= logging.INFO], secrets) == []
    debug = [record for record in records if record.levelno == logging.DEBUG]
    for secret in secrets:
        assert with_secret(debug, (secret,)), f"{secret!r} is in no DEBUG line"
    return result, records


def test_it_declines_a_near_miss_naming_only_ids_and_counts_at_info(caplog, alice):
    lab = make_collection(alice, "Lab")
    ingest(lab, "warranty.md", WARRANTY)
    question = "What is the warranty of the Kestrel switch of the Zanzibarite lab?"

    def ask() -> dict[str, Any]:
        return collect(answer_events(start(alice, question, collection_ids=[lab.pk]), model=ScriptedChat()))

    result, records = assert_content_only_at_debug(caplog, ask, "Kestrel", "Zanzibarite")
    assert result["abstain"] is True
    assert "Kestrel" in result["answer"]  # the user is told; the log is not
    (line,) = [
        r.getMessage() for r in records if r.levelno == logging.INFO and "Not in the documents" in r.getMessage()
    ]
    assert f"conversation {result['conversation']}" in line
    assert "1 name(s)" in line


def test_it_answers_with_a_table_cell_naming_the_document_and_chunk_at_info(caplog, alice, settings):
    settings.ANSWER_JUDGE = -0.3
    models = make_collection(alice, "Models")
    document = ingest(models, "models.csv", MODELS_CSV)
    question = "What BIC does the hurdle model fm_kestrel have?"

    def ask() -> dict[str, Any]:
        return collect(answer_events(start(alice, question), model=JudgedChat(judge=0.9, answer="24412.5 [1].")))

    result, records = assert_content_only_at_debug(caplog, ask, "fm_kestrel", "31337.9")
    assert result["checks"] == {"table_cell": 1}
    assert result["answer"].startswith("31337.9")
    (line,) = [r.getMessage() for r in records if r.levelno == logging.INFO and "table cell" in r.getMessage()]
    assert f"of document {document.pk}, chunk " in line


def test_it_warns_of_unusable_router_output_by_its_length(caplog):
    output = "Route it through the Zanzibarite lab, I think"

    def ask() -> str:
        return router.route(ScriptedChat(route=output), "公司的 Zanzibarite 密码多久要更换一次？", LEAVE).strategy

    strategy, records = assert_content_only_at_debug(caplog, ask, "Zanzibarite")
    assert strategy == "direct"
    (warning,) = [record.getMessage() for record in records if record.levelno == logging.WARNING]
    assert warning == f"Router output unusable ({len(output)} characters); rules chose direct"

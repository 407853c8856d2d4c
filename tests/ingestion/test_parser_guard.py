"""A file that hangs or crashes its parser fails its own document with a reason, within the
time limit per page, and the worker goes on: parsers run in a forked child
(ingestion/parsers/guard.py). The parsers that hang, crash or fail here are generated; the
pages that come back are compared with a real parser's in the worker."""

from __future__ import annotations

import ctypes
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import psutil
import pytest
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile

from common.cancelled import Cancelled
from ingestion import actions
from ingestion.models import IngestionRun
from ingestion.parsers import guard
from ingestion.parsers.base import Block, ParsedPage, ParseError, Parser
from ingestion.parsers.guard import GuardedParser, allow, guarded
from ingestion.parsers.pdf import PdfParser
from ingestion.parsers.text import MarkdownParser
from ingestion.stages import profiling, stage
from knowledge.models import Document
from tests.ingestion.files import handbook_pdf, png
from tests.ingestion.runs import add, run_it

LIMIT = 2.0  # seconds a page may take in these tests


def page(number: int) -> ParsedPage:
    return ParsedPage(number=number, kind="section", blocks=(Block("text", f"Part {number}."),), render=png(8, 8))


class Slow(Parser):
    """Page 1 at once, page 2 after `pause` seconds (having asked for `allowed` more), page 3."""

    def __init__(self, pause: float, allowed: float = 0.0) -> None:
        self.pause = pause
        self.allowed = allowed

    def pages(self, path: Path) -> Iterator[ParsedPage]:
        yield page(1)
        if self.allowed:
            allow(self.allowed)
        time.sleep(self.pause)
        yield page(2)
        yield page(3)


class SlowCount(Parser):
    def pages(self, path: Path) -> Iterator[ParsedPage]:
        yield page(1)

    def count(self, path: Path) -> int | None:
        time.sleep(3600)
        return 1


class Crashing(Parser):
    """Page 1, then a segmentation fault, as a damaged file can cause in a C library."""

    def pages(self, path: Path) -> Iterator[ParsedPage]:
        yield page(1)
        ctypes.string_at(0)
        yield page(2)


class Failing(Parser):
    def __init__(self, error: Exception) -> None:
        self.error = error

    def pages(self, path: Path) -> Iterator[ParsedPage]:
        with stage("layout"):
            time.sleep(0.05)
        raise self.error


def children() -> set[int]:
    return {child.pid for child in psutil.Process().children()}


@pytest.fixture
def before() -> set[int]:
    return children()


def test_a_real_parsers_pages_come_back_whole_and_its_stages_are_counted(tmp_path, before):
    path = handbook_pdf(tmp_path / "handbook.pdf")
    with profiling() as here:
        direct = list(PdfParser().pages(path))
    started = time.perf_counter()
    with profiling() as profile:
        pages = list(GuardedParser(PdfParser(), 60).pages(path))
        stored = profile.as_json()
    wall = time.perf_counter() - started
    assert pages == direct  # every block, table, picture and render
    assert GuardedParser(PdfParser(), 60).count(path) == PdfParser().count(path) == len(direct)
    assert stored["counts"] == here.as_json()["counts"]  # timed in the child, counted here
    assert sum(stored["seconds"].values()) == pytest.approx(wall, abs=0.05)  # still adds up to wall time
    assert children() == before


def test_a_page_slower_than_the_limit_ends_the_child_and_names_the_page(tmp_path, before):
    parser = GuardedParser(Slow(pause=3600), LIMIT)
    started = time.monotonic()
    pages = parser.pages(tmp_path)
    assert next(pages).number == 1
    with pytest.raises(ParseError, match=r"Page 2 took longer than 2 seconds to read") as raised:
        next(pages)
    assert time.monotonic() - started < LIMIT + 2
    assert "save or export it again" in str(raised.value)
    assert children() == before  # killed and reaped: no hung process left behind


def test_a_file_that_hangs_its_parser_while_counting_pages_says_so(tmp_path, before):
    with pytest.raises(ParseError, match=r"^Opening the file took longer than 2 seconds"):
        GuardedParser(SlowCount(), LIMIT).count(tmp_path)
    assert children() == before


def test_a_parser_waiting_on_a_program_with_its_own_limit_gets_that_long(tmp_path):
    pages = GuardedParser(Slow(pause=LIMIT + 0.5, allowed=2), LIMIT).pages(tmp_path)
    assert [parsed.number for parsed in pages] == [1, 2, 3]


def test_a_parser_that_crashes_fails_with_how_and_the_next_file_is_read(tmp_path, before):
    with pytest.raises(ParseError, match=r"stopped unexpectedly on page 2 \(SIGSEGV\)"):
        list(GuardedParser(Crashing(), LIMIT).pages(tmp_path))
    assert [parsed.number for parsed in GuardedParser(Slow(pause=0), LIMIT).pages(tmp_path)] == [1, 2, 3]
    assert children() == before


def test_errors_come_back_as_raised_with_the_childs_traceback(tmp_path):
    with pytest.raises(ParseError, match=r"^The table is damaged\.$") as readable:
        list(GuardedParser(Failing(ParseError("The table is damaged.")), LIMIT).pages(tmp_path))
    assert not getattr(readable.value, "__notes__", None)  # a message for a person, no traceback
    with pytest.raises(ValueError, match="bad offset") as unexpected:
        list(GuardedParser(Failing(ValueError("bad offset")), LIMIT).pages(tmp_path))
    assert "in pages" in unexpected.value.__notes__[0]  # where it happened, in the child


def test_a_slow_page_beats_and_can_be_cancelled(tmp_path, monkeypatch, before):
    monkeypatch.setattr(guard, "BEAT_SECONDS", 0.1)
    beats = []

    def waiting() -> None:
        beats.append(time.monotonic())
        if len(beats) == 3:
            raise Cancelled

    with pytest.raises(Cancelled):
        list(GuardedParser(Slow(pause=3600), 60, waiting).pages(tmp_path))
    assert len(beats) == 3
    assert children() == before


def test_a_reader_that_stops_early_ends_its_child(tmp_path, before):
    pages = GuardedParser(Slow(pause=0), LIMIT).pages(tmp_path)
    assert next(pages).number == 1
    assert children() != before
    pages.close()  # type: ignore[attr-defined]
    assert children() == before


def test_a_limit_of_zero_reads_in_the_worker(settings):
    parser = MarkdownParser()
    settings.PARSE_PAGE_SECONDS = 0
    assert guarded(parser) is parser
    settings.PARSE_PAGE_SECONDS = 30
    assert isinstance(guarded(parser), GuardedParser)


def hangs_on_page_two(_parser: Parser, _path: Path) -> Iterator[ParsedPage]:
    """A Markdown reader's pages as a file built to hang it would make them."""
    yield page(1)
    time.sleep(3600)
    yield page(2)


def cannot_tell(_parser: Parser, _path: Path) -> None:
    """A format whose page count is not known before its pages are read."""


def hangs_at_once(_parser: Parser, _path: Path) -> Iterator[ParsedPage]:
    time.sleep(3600)
    yield page(1)


@pytest.mark.usefixtures("media")
def test_a_hanging_file_fails_alone_and_the_worker_goes_on(db, private_collection, embedder, settings, monkeypatch):
    settings.PARSE_PAGE_SECONDS = LIMIT
    hanging, hanging_run = add(private_collection, "hangs.md", b"# One\n\nFirst part.\n\n# Two\n\nSecond part.\n")
    good, good_run = add(private_collection, "good.md", b"# Fine\n\nThis note is read as usual.\n")
    with monkeypatch.context() as patched:
        patched.setattr(MarkdownParser, "pages", hangs_on_page_two)
        patched.setattr(MarkdownParser, "count", cannot_tell)
        assert run_it(hanging_run, embedder) is None
    result = run_it(good_run, embedder)
    hanging.refresh_from_db()
    hanging_run.refresh_from_db()
    assert hanging_run.status == IngestionRun.Status.FAILED
    assert hanging.status == Document.Status.FAILED
    assert "Page 2 took longer than 2 seconds to read" in hanging.error
    assert hanging_run.error == hanging.error
    assert result is not None
    assert result.pages == 1
    good.refresh_from_db()
    assert good.status == Document.Status.READY


@pytest.mark.usefixtures("media")
def test_a_long_page_keeps_its_run_alive_and_a_cancel_stops_it(db, private_collection, embedder, monkeypatch):
    from ingestion import pipeline

    monkeypatch.setattr(guard, "BEAT_SECONDS", 0.1)
    monkeypatch.setattr(MarkdownParser, "pages", hangs_on_page_two)
    monkeypatch.setattr(MarkdownParser, "count", cannot_tell)
    _document, run = add(private_collection, "slow.md", b"# Slow\n\nA note.\n")
    heartbeats: list[datetime | None] = []
    real_beat = pipeline._beat

    def beat(run: IngestionRun, pages: int | None = None) -> None:
        real_beat(run, pages)
        heartbeats.append(IngestionRun.objects.values_list("heartbeat_at", flat=True).get(pk=run.pk))
        if len(heartbeats) == 4:  # page 1's progress, then three beats while page 2 takes long
            IngestionRun.objects.filter(pk=run.pk).update(cancel_requested=True)

    monkeypatch.setattr(pipeline, "_beat", beat)
    assert run_it(run, embedder) is None
    run.refresh_from_db()
    assert run.status == IngestionRun.Status.CANCELLED
    beats = [beat for beat in heartbeats if beat is not None]
    assert len(beats) == 4
    assert beats == sorted(beats)
    assert beats[3] > beats[0]  # the beats while page 2 took long moved it on


@pytest.mark.usefixtures("media")
def test_a_replacement_that_hangs_its_parser_is_refused(db, settings, monkeypatch):
    settings.PARSE_PAGE_SECONDS = LIMIT
    monkeypatch.setattr(MarkdownParser, "pages", hangs_at_once)
    with pytest.raises(ValidationError, match="Page 1 took longer than 2 seconds to read"):
        actions.check_replacement("notes/hangs.md", ContentFile(b"# Hangs\n"), "text/markdown")

"""Where an ingestion run's time goes, stage by stage (open, text and layout, table
detection, table grid, pictures, renders, OCR, picture descriptions, speech, chunking,
embedding, database writes): the pipeline opens a profile for each run and records it on the
run (IngestionRun.stages, shown on the admin's run page); bench/ingest.py --profile sums them
over a set of files.

Times are exclusive: a stage entered inside another (the OCR inside the picture stage)
pauses the outer one, so a run's stages add up to its wall time and stack in a plot. Code
outside a profile (tests calling a parser directly) pays one context-variable read per stage.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext_lazy as _

# The stages, in the order a page meets them: the keys of a profile, and their names.
LABELS = {
    "open": _("open the file"),
    "layout": _("text and layout"),
    "table_detection": _("table detection"),
    "table_grid": _("table grid"),
    "pictures": _("picture extraction"),
    "render": _("page render"),
    "ocr": _("OCR"),
    "picture_description": _("picture description"),
    "caption": _("model captions and summaries"),
    "speech": _("speech recognition"),
    "chunking": _("chunking"),
    "embedding": _("embedding"),
    "database": _("database writes"),
    "other": _("other"),
}
STAGES = tuple(LABELS)


def stage_label(name: str) -> str:
    return str(LABELS.get(name, name))


@dataclass
class Profile:
    seconds: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # how often each stage ran
    slowest_page: tuple[int, float] | None = None  # (number, seconds) of the page that took longest
    _stack: list[str] = field(default_factory=list)
    _mark: float = field(default_factory=time.perf_counter)

    def _charge(self) -> None:
        now = time.perf_counter()
        current = self._stack[-1] if self._stack else "other"
        self.seconds[current] = self.seconds.get(current, 0.0) + now - self._mark
        self._mark = now

    def enter(self, name: str) -> None:
        self._charge()
        self._stack.append(name)
        self.counts[name] = self.counts.get(name, 0) + 1

    def leave(self) -> None:
        self._charge()
        self._stack.pop()

    def take(self) -> tuple[dict[str, float], dict[str, int]]:
        """The seconds and counts recorded since the last take, to hand to another process's
        profile (a parser's child: ingestion.parsers.guard); "other" stays here."""
        self._charge()
        seconds = {name: value for name, value in self.seconds.items() if name != "other"}
        counts = dict(self.counts)
        for name in seconds:
            del self.seconds[name]
        self.counts.clear()
        return seconds, counts

    def absorb(self, seconds: dict[str, float], counts: dict[str, int]) -> None:
        """Stages timed in a child this process waited for: they replace that much of the
        wait, which was charged to the current stage, so the stages still add up to wall time."""
        self._charge()
        current = self._stack[-1] if self._stack else "other"
        moved = min(sum(seconds.values()), self.seconds.get(current, 0.0))
        self.seconds[current] = self.seconds.get(current, 0.0) - moved
        for name, value in seconds.items():
            self.seconds[name] = self.seconds.get(name, 0.0) + value
        for name, count in counts.items():
            self.counts[name] = self.counts.get(name, 0) + count

    def page_done(self, number: int, seconds: float) -> None:
        if self.slowest_page is None or seconds > self.slowest_page[1]:
            self.slowest_page = (number, seconds)

    def as_json(self) -> dict[str, Any]:
        """The profile as stored on a run: seconds (rounded to the millisecond), calls, and
        the slowest page with its seconds."""
        self._charge()
        stored: dict[str, Any] = {
            "seconds": {name: round(self.seconds[name], 3) for name in STAGES if self.seconds.get(name)},
            "counts": {name: self.counts[name] for name in STAGES if self.counts.get(name)},
        }
        if self.slowest_page is not None:
            stored["slowest_page"] = [self.slowest_page[0], round(self.slowest_page[1], 3)]
        return stored


_current: ContextVar[Profile | None] = ContextVar("ingestion_profile", default=None)


def current_profile() -> Profile | None:
    return _current.get()


@contextlib.contextmanager
def profiling() -> Iterator[Profile]:
    """Record the stages run inside this block into a new profile."""
    profile = Profile()
    token = _current.set(profile)
    try:
        yield profile
    finally:
        _current.reset(token)


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Count the time inside this block (less its inner stages) to `name`, one of STAGES."""
    profile = _current.get()
    if profile is None:
        yield
        return
    profile.enter(name)
    try:
        yield
    finally:
        profile.leave()

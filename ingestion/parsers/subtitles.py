"""SRT and WebVTT subtitles: every cue a timed text block, one page per minute, the same
pages a video's transcript makes, so that a citation can point at the moment it was said."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from django.utils.translation import gettext as _

from ingestion.encoding import decode_text
from ingestion.parsers.base import Block, ParsedPage, ParseError, Parser
from ingestion.parsers.video import SEGMENT_SECONDS
from ingestion.sniff import SRT, VTT

TIME = r"(?:(\d+):)?(\d{1,2}):(\d{1,2})[,.](\d{1,3})"
# "00:01:02,500 --> 00:01:04,000" (SRT), "01:02.500 --> 01:04.000 align:start" (WebVTT).
TIMING = re.compile(rf"^\s*{TIME}\s*-->\s*{TIME}")
TAG = re.compile(r"<[^>]*>")  # <i>, <b>, <c.yellow>, <v Speaker>, <00:00:01.000>
ASS_OVERRIDE = re.compile(r"\{\\[^}]*\}")  # {\an8}, which some SRT writers put in


@dataclass(frozen=True)
class Cue:
    start: float
    end: float
    text: str


class SubtitleParser(Parser):
    mime_types = (VTT, SRT)

    def pages(self, path: Path) -> Iterator[ParsedPage]:
        text, _encoding = decode_text(path.read_bytes())
        cues = parse_cues(text)
        if not cues:
            raise ParseError(_("No subtitles were found in the file: it has no “00:00:01,000 --> 00:00:02,000” cues."))
        windows: dict[int, list[Cue]] = {}
        for cue in cues:
            windows.setdefault(int(cue.start // SEGMENT_SECONDS), []).append(cue)
        for number, index in enumerate(sorted(windows), start=1):
            window = windows[index]
            start = float(index * SEGMENT_SECONDS)
            yield ParsedPage(
                number=number,
                kind="video_segment",
                blocks=tuple(Block("text", cue.text, t_start=cue.start, t_end=cue.end) for cue in window),
                meta={"t_start": start, "t_end": max(start + SEGMENT_SECONDS, *(cue.end for cue in window))},
            )


def parse_cues(text: str) -> list[Cue]:
    """The cues with text, in time order. A cue is a timing line and the lines after it up to
    a blank line; the line right above the timing is its identifier (SRT's number). Anything
    outside cues (the WEBVTT header, NOTE, STYLE and REGION blocks) is skipped."""
    cues: list[tuple[float, float, list[str]]] = []
    lines: list[str] | None = None  # the open cue's text lines
    previous = ""
    for line in text.lstrip("\ufeff").split("\n"):
        timing = TIMING.match(line)
        if timing:
            if lines and lines[-1] == previous.strip():
                lines.pop()  # no blank line before this cue: that was its identifier
            start, end = _seconds(timing.groups()[:4]), _seconds(timing.groups()[4:])
            lines = []
            cues.append((start, max(end, start), lines))
        elif not line.strip():
            lines = None
        elif lines is not None:
            lines.append(line.strip())
        previous = line
    result: list[Cue] = []
    for start, end, cue_lines in sorted(cues, key=lambda cue: cue[0]):
        cleaned = [_clean(line) for line in cue_lines]
        # Rolling captions (YouTube's) repeat the previous cue's last line above the new one.
        if result and cleaned and cleaned[0] == result[-1].text.split("\n")[-1]:
            cleaned = cleaned[1:]
        joined = "\n".join(line for line in cleaned if line)
        if joined:
            result.append(Cue(round(start, 3), round(end, 3), joined))
    return result


def _seconds(parts: tuple[str | None, ...]) -> float:
    hours, minutes, seconds, millis = parts
    fraction = int((millis or "0").ljust(3, "0")) / 1000  # ",5" is half a second
    return int(hours or 0) * 3600 + int(minutes or 0) * 60 + int(seconds or 0) + fraction


def _clean(line: str) -> str:
    return " ".join(html.unescape(ASS_OVERRIDE.sub("", TAG.sub("", line))).split())

"""MP4, WebM and MOV with the ffmpeg that imageio-ffmpeg ships (there is no ffprobe): one page
per minute of video, holding the keyframes shown in that minute (for OCR) and the minute's
sound as 16 kHz mono WAV (for speech recognition), every block with its time in seconds.

Keyframes are picked at scene changes and at a fixed interval, never closer together than
the video's length allows under PORTAL_MAX_VIDEO_FRAMES. Long or large videos decode only
their keyframes (`-skip_frame nokey`), so a three-hour recording costs seconds, not an hour."""

from __future__ import annotations

import io
import itertools
import math
import re
import subprocess
import tempfile
import wave
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.utils.translation import gettext as _

from ingestion.parsers.base import Block, ParsedPage, ParseError, Parser
from ingestion.parsers.guard import allow
from ingestion.sniff import MOV, MP4, WEBM

SEGMENT_SECONDS = 60  # one page per minute of video
FRAME_INTERVAL = 30.0  # seconds between keyframes when nothing changes on screen
SCENE_THRESHOLD = 0.3  # ffmpeg's scene score (0..1) above which a frame starts a new scene
FRAME_MAX_WIDTH = 960
AUDIO_RATE = 16000
MIN_AUDIO_SECONDS = 0.2  # a shorter tail of sound is not worth recognising
# Decoding every frame finds scene changes between keyframes too, but costs about 1 s per
# 10^9 pixels on two cores (10 min of 360p: 4 s); above this many, only keyframes are decoded
# (a 3-hour 720p video: 10 s).
FULL_DECODE_PIXELS = 300 * 30 * 1920 * 1080  # five minutes of 1080p at 30 fps
PROBE_TIMEOUT = 60
DURATION = re.compile(r"Duration: (?:(\d+):(\d{2}):(\d{2}(?:\.\d+)?)|N/A)")
STREAM = re.compile(r"^\s*Stream #\d+:\d+.*?: (Video|Audio): (.*)$", re.MULTILINE)
SIZE = re.compile(r"\b([1-9]\d{0,4})x([1-9]\d{0,4})\b")
FPS = re.compile(r"([\d.]+) (?:fps|tbr)\b")
ROTATION = re.compile(r"rotation of (-?[\d.]+) degrees")
PTS_TIME = re.compile(r"\bn:\s*\d+\s+pts:\s*-?\d+\s+pts_time:(-?[\d.]+|nan)")
PROGRESS_TIME = re.compile(r"time=(\d+):(\d{2}):(\d{2}(?:\.\d+)?)")
# What the MP4 and Matroska readers say when the file stops before its own index says it ends.
TRUNCATED = re.compile(r"partial file|File ended prematurely")


@dataclass(frozen=True)
class Probe:
    duration: float  # seconds
    width: int
    height: int
    fps: float
    has_audio: bool


@dataclass(frozen=True)
class Frame:
    t: float  # seconds, the frame's real presentation time
    path: Path


class VideoParser(Parser):
    mime_types = (MP4, WEBM, MOV)

    def pages(self, path: Path) -> Iterator[ParsedPage]:
        ffmpeg, probe = _opened(path)
        with tempfile.TemporaryDirectory(prefix="video-") as tmp:
            frames, wav_path = extract(ffmpeg, path, probe, Path(tmp))
            if wav_path is None:
                yield from _segments(probe, frames, None)
                return
            with wave.open(str(wav_path), "rb") as wav:
                yield from _segments(probe, frames, wav)

    def check(self, path: Path) -> None:
        # Its first page would extract the frames and sound of the whole video: probing it is enough.
        _opened(path)


def _opened(path: Path) -> tuple[str, Probe]:
    """ffmpeg and what it says about the video, within PORTAL_MAX_MEDIA_MINUTES."""
    ffmpeg = _ffmpeg()
    probe = probe_video(ffmpeg, path)
    limit = settings.MAX_MEDIA_MINUTES
    if probe.duration > limit * 60:
        raise ParseError(
            _(
                "The video is %(minutes)s minutes long; the limit is %(limit)s minutes "
                "(PORTAL_MAX_MEDIA_MINUTES). Cut it into shorter parts."
            )
            % {"minutes": math.ceil(probe.duration / 60), "limit": limit}
        )
    return ffmpeg, probe


def _ffmpeg() -> str:
    try:
        import imageio_ffmpeg

        return str(imageio_ffmpeg.get_ffmpeg_exe())
    except (ImportError, RuntimeError) as exc:
        raise ParseError(_("Videos cannot be read here: ffmpeg is missing (%(reason)s).") % {"reason": exc}) from exc


def _run(command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    allow(timeout)  # the page's own time limit waits for ffmpeg's
    try:
        return subprocess.run(
            command, capture_output=True, text=True, errors="replace", timeout=timeout, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        raise ParseError(
            _("Reading the video took longer than %(seconds)s seconds; it may be damaged.")
            % {"seconds": round(timeout)}
        ) from None


def probe_video(ffmpeg: str, path: Path) -> Probe:
    """Duration and streams from what `ffmpeg -i` says about the input."""
    log = _run([ffmpeg, "-hide_banner", "-nostdin", "-i", str(path)], PROBE_TIMEOUT).stderr
    if "Input #0" not in log:
        raise ParseError(
            _("The video cannot be read: it is damaged or not really a video (%(reason)s).")
            % {"reason": _last_line(log)}
        )
    streams = [(kind, line) for kind, line in STREAM.findall(log.split("Output #")[0])]
    # Cover art inside an audio file is a "video" stream too: it is no picture to index.
    pictures = [line for kind, line in streams if kind == "Video" and "(attached pic)" not in line]
    if not pictures:
        raise ParseError(_("The file has no video picture (only sound, or nothing): it cannot be indexed as a video."))
    size = SIZE.search(pictures[0])
    if size is None:
        raise ParseError(_("The video cannot be read: its picture size is unknown."))
    width, height = int(size.group(1)), int(size.group(2))
    rotation = ROTATION.search(log)
    if rotation and round(abs(float(rotation.group(1)))) % 180 == 90:  # phones film sideways; ffmpeg turns it
        width, height = height, width
    fps = FPS.search(pictures[0])
    duration = _duration(log) or _measured_duration(ffmpeg, path)
    if duration <= 0:
        raise ParseError(_("The video cannot be read: its length is unknown or zero."))
    return Probe(
        duration=duration,
        width=width,
        height=height,
        fps=float(fps.group(1)) if fps else 30.0,
        has_audio=any(kind == "Audio" for kind, _line in streams),
    )


def _duration(log: str) -> float:
    match = DURATION.search(log)
    if match is None or match.group(1) is None:
        return 0.0
    hours, minutes, seconds = match.groups()
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def _measured_duration(ffmpeg: str, path: Path) -> float:
    """Some WebM files (browser recordings) do not state their length: copy the video
    stream to nowhere, which reads every packet without decoding one, and see where it ends."""
    command = [ffmpeg, "-hide_banner", "-nostdin", "-i", str(path), "-map", "0:V:0", "-c", "copy", "-f", "null", "-"]
    times = PROGRESS_TIME.findall(_run(command, PROBE_TIMEOUT * 5).stderr)
    if not times:
        return 0.0
    hours, minutes, seconds = times[-1]
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def frame_spacing(duration: float, max_frames: int) -> tuple[float, float]:
    """(interval, minimum gap): a frame at least every `interval` seconds, scene changes
    closer than `minimum gap` to the last frame are skipped, so no video yields more than
    `max_frames` frames. Half the budget goes to the interval, half to scene changes."""
    gap = duration / max(max_frames - 1, 1)
    interval = max(FRAME_INTERVAL, duration / max(max_frames / 2, 1), gap)
    return interval, gap


def extract(ffmpeg: str, path: Path, probe: Probe, tmp: Path) -> tuple[list[Frame], Path | None]:
    """Keyframes as PNG files with their times, and the sound track as one WAV file, in one
    pass over the file."""
    max_frames = settings.MAX_VIDEO_FRAMES
    interval, gap = frame_spacing(probe.duration, max_frames)
    select = (
        f"select='isnan(prev_selected_t)+gte(t-prev_selected_t,{interval:.3f})"
        f"+gt(scene,{SCENE_THRESHOLD})*gte(t-prev_selected_t,{gap:.3f})'"
    )
    decoded_pixels = probe.duration * probe.fps * probe.width * probe.height
    command = [ffmpeg, "-hide_banner", "-nostdin", "-nostats"]
    if decoded_pixels > FULL_DECODE_PIXELS:
        command += ["-skip_frame", "nokey"]
    command += ["-i", str(path), "-map", "0:V:0", "-an", "-sn", "-dn"]
    command += ["-vf", f"{select},scale='min({FRAME_MAX_WIDTH},iw)':-2,showinfo"]
    command += ["-fps_mode", "passthrough", "-frames:v", str(max_frames), "-f", "image2", str(tmp / "%06d.png")]
    wav_path = tmp / "audio.wav" if probe.has_audio else None
    if wav_path is not None:
        command += ["-map", "0:a:0", "-vn", "-sn", "-dn", "-ac", "1", "-ar", str(AUDIO_RATE)]
        command += ["-c:a", "pcm_s16le", "-bitexact", "-f", "wav", str(wav_path)]
    # Keyframe decoding runs at hundreds of frames a second; a generous bound still ends a hang.
    result = _run(command, timeout=120 + probe.duration / 4)
    times = [float(t) for t in PTS_TIME.findall(result.stderr) if t != "nan"]
    files = sorted(tmp.glob("*.png"))
    if result.returncode != 0 or not files:
        raise ParseError(
            _("No picture of the video could be decoded: it is damaged (%(reason)s).")
            % {"reason": _last_line(result.stderr)}
        )
    if TRUNCATED.search(result.stderr):
        raise ParseError(_("The video file is cut short (an interrupted upload?): upload the whole file again."))
    frames = [Frame(round(max(t, 0.0), 3), file) for t, file in zip(times, files, strict=False)]
    return frames, wav_path if wav_path is not None and wav_path.exists() else None


def _segments(probe: Probe, frames: list[Frame], wav: wave.Wave_read | None) -> Iterator[ParsedPage]:
    windows = max(math.ceil(probe.duration / SEGMENT_SECONDS), 1)
    by_window: dict[int, list[Frame]] = {}
    for frame in frames:
        by_window.setdefault(min(int(frame.t // SEGMENT_SECONDS), windows - 1), []).append(frame)
    # A frame is on screen until the next one, or until its segment ends.
    shown_until = {frame.t: following.t for frame, following in itertools.pairwise(frames)}
    number = 0
    for index in range(windows):
        start = float(index * SEGMENT_SECONDS)
        end = min(start + SEGMENT_SECONDS, round(probe.duration, 3))
        blocks = [
            Block(
                "image",
                "",
                image=frame.path.read_bytes(),
                read_text=True,
                t_start=frame.t,
                t_end=max(min(shown_until.get(frame.t, end), end), frame.t),
            )
            for frame in by_window.get(index, [])
        ]
        audio = _audio_block(wav, start, end) if wav is not None else None
        if audio is not None:
            blocks.append(audio)
        if not blocks:
            continue  # past the end of a file whose stated length was longer than its content
        number += 1
        yield ParsedPage(
            number=number,
            kind="video_segment",
            blocks=tuple(blocks),
            width=probe.width,
            height=probe.height,
            render=blocks[0].image,
            meta={"t_start": start, "t_end": end, "duration": round(probe.duration, 3), "has_audio": probe.has_audio},
        )


def _audio_block(wav: wave.Wave_read, start: float, end: float) -> Block | None:
    rate, total = wav.getframerate(), wav.getnframes()
    first = min(round(start * rate), total)
    count = min(round(end * rate), total) - first
    if count < MIN_AUDIO_SECONDS * rate:
        return None
    wav.setpos(first)
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(wav.getnchannels())
        out.setsampwidth(wav.getsampwidth())
        out.setframerate(rate)
        out.writeframes(wav.readframes(count))
    return Block("audio", "", audio=buffer.getvalue(), t_start=start, t_end=round((first + count) / rate, 3))


def _last_line(log: str) -> str:
    lines = [line.strip() for line in log.splitlines() if line.strip() and not line.startswith("[Parsed_showinfo")]
    return (lines[-1] if lines else _("no details"))[:300]

"""Videos, subtitles and video links, parsed from real files made by tests/ingestion/media_files.py."""

from __future__ import annotations

import io
import itertools
import json
import time
import wave

import pytest
from PIL import Image

from ingestion.parsers import video as video_parser
from ingestion.parsers.base import ParsedPage, ParseError
from ingestion.parsers.formats import parser_for, supported_types
from ingestion.sniff import MOV, MP4, SRT, VIDEO_LINK, VTT, WEBM, sniff
from tests.ingestion.media_files import (
    ffmpeg,
    make_audio_only,
    make_plain_video,
    make_rotated,
    make_silent_video,
    make_srt,
    make_streamed_webm,
    make_video,
    make_vtt,
)

THREE_HOURS = 3 * 3600


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    return tmp_path_factory.mktemp("media")


@pytest.fixture(scope="module")
def video(media):
    return make_video(media / "invoice.mp4")


@pytest.fixture(scope="module")
def long_video(media):
    return make_plain_video(media / "long.mp4", THREE_HOURS)


def parse(path) -> list[ParsedPage]:
    return list(parser_for(sniff(path)).pages(path))


def frame_times(pages: list[ParsedPage]) -> list[tuple[float, float]]:
    """(start, end) of every keyframe of the pages, in order."""
    times = []
    for block in (block for page in pages for block in page.blocks if block.kind == "image"):
        assert block.t_start is not None
        assert block.t_end is not None
        times.append((block.t_start, block.t_end))
    return times


def wav_seconds(data: bytes) -> float:
    with wave.open(io.BytesIO(data), "rb") as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 16000)
        return wav.getnframes() / wav.getframerate()


def test_it_reads_a_video_as_timed_keyframes_and_sound(video):
    assert sniff(video) == MP4
    (page,) = parse(video)
    assert (page.number, page.kind, page.width, page.height) == (1, "video_segment", 320, 240)
    assert [block.kind for block in page.blocks] == ["image", "image", "audio"]
    first, second, audio = page.blocks
    assert (first.t_start, first.t_end) == pytest.approx((0, 3), abs=0.05)  # shown until the scene changes
    assert (second.t_start, second.t_end) == pytest.approx((3, 6), abs=0.05)
    assert all(block.read_text and block.text == "" for block in (first, second))
    assert first.image is not None
    assert second.image is not None
    white, yellow = Image.open(io.BytesIO(first.image)), Image.open(io.BytesIO(second.image))
    assert white.size == (320, 240)
    assert white.convert("RGB").getpixel((5, 5)) == pytest.approx((255, 255, 255), abs=8)
    assert yellow.convert("RGB").getpixel((5, 5)) == pytest.approx((250, 210, 40), abs=12)
    assert page.render == first.image
    assert audio.audio is not None
    assert (audio.t_start, audio.t_end) == pytest.approx((0, 6), abs=0.1)
    assert wav_seconds(audio.audio) == pytest.approx(6, abs=0.1)
    assert page.meta == {
        "t_start": 0.0,
        "t_end": pytest.approx(6, abs=0.05),
        "duration": pytest.approx(6, abs=0.05),
        "has_audio": True,
    }


def test_it_gives_the_same_pages_for_the_same_video(video):
    again = [page.content_sha256 for page in parse(video)]
    assert again == [page.content_sha256 for page in parse(video)]


def test_it_reads_a_silent_video_without_sound_blocks(media):
    (page,) = parse(make_silent_video(media / "silent.mp4"))
    assert [block.kind for block in page.blocks] == ["image", "image"]
    assert page.meta["has_audio"] is False


def test_it_cuts_a_video_into_minutes_with_a_frame_at_least_every_30_seconds(media):
    pages = parse(make_plain_video(media / "minutes.mp4", 130, fps=5, with_audio=True))
    assert [page.number for page in pages] == [1, 2, 3]
    assert [(page.meta["t_start"], page.meta["t_end"]) for page in pages] == [(0, 60), (60, 120), (120, 130)]
    for page in pages:
        start, end = page.meta["t_start"], page.meta["t_end"]
        assert isinstance(start, float)
        assert isinstance(end, float)
        audio = page.blocks[-1]
        assert audio.kind == "audio"
        assert audio.audio is not None
        assert (audio.t_start, audio.t_end) == (start, end)
        assert wav_seconds(audio.audio) == pytest.approx(end - start, abs=0.05)
        frames = frame_times([page])
        assert frames
        assert frames[0][0] == pytest.approx(start, abs=0.5)
        assert all(start <= t_start <= t_end <= end for t_start, t_end in frames)
    starts = [t_start for t_start, _t_end in frame_times(pages)]
    assert starts == sorted(starts)
    assert max(b - a for a, b in itertools.pairwise(starts)) <= 30.5
    # The colour changes every 5 s: scene changes bring frames between the 30 s ones.
    assert len(starts) > 130 / 30 + 1


def test_it_reads_a_webm_that_does_not_state_its_length(media):
    pages = parse(make_streamed_webm(media / "streamed.webm", seconds=70))
    assert [page.meta["t_end"] for page in pages] == [60, pytest.approx(70, abs=0.3)]
    assert all(page.meta["duration"] == pytest.approx(70, abs=0.3) for page in pages)
    assert [block.kind for block in pages[1].blocks] == ["image", "audio"]


def test_it_turns_videos_filmed_sideways_upright(video, media):
    (page,) = parse(make_rotated(video, media / "rotated.mp4"))
    assert (page.width, page.height) == (240, 320)
    assert page.render is not None
    assert Image.open(io.BytesIO(page.render)).size == (240, 320)


def test_it_scales_frames_to_at_most_960_pixels_wide(media):
    (page,) = parse(make_plain_video(media / "wide.mp4", 2, fps=2, size="1280x720"))
    assert (page.width, page.height) == (1280, 720)
    assert page.render is not None
    assert Image.open(io.BytesIO(page.render)).size == (960, 540)


def test_it_refuses_a_recording_without_a_picture(media):
    sound = make_audio_only(media / "sound.m4a")
    assert sniff(sound) == MP4
    with pytest.raises(ParseError, match="no video picture"):
        parse(sound)


def test_it_refuses_a_damaged_video(video, media):
    truncated = media / "truncated.mp4"
    truncated.write_bytes(video.read_bytes()[: video.stat().st_size // 2])
    with pytest.raises(ParseError, match="damaged"):
        parse(truncated)
    # With its index at the front (as the web likes it) the start of a cut file still plays.
    ffmpeg("-i", str(video), "-c", "copy", "-movflags", "+faststart", str(media / "faststart.mp4"))
    truncated.write_bytes((media / "faststart.mp4").read_bytes()[: video.stat().st_size * 2 // 3])
    with pytest.raises(ParseError, match="cut short"):
        parse(truncated)
    garbage = media / "garbage.mp4"
    garbage.write_bytes(b"\x00\x00\x00\x18ftypisom" + bytes(range(256)) * 40)
    with pytest.raises(ParseError, match="damaged"):
        parse(garbage)


@pytest.mark.parametrize(("suffix", "mime"), [(".webm", WEBM), (".mov", MOV)])
def test_it_reads_webm_and_mov(media, suffix, mime):
    path = make_video(media / f"clip{suffix}", seconds=4)
    assert sniff(path) == mime
    (page,) = parse(path)
    assert [block.kind for block in page.blocks] == ["image", "image", "audio"]
    assert page.blocks[1].t_start == pytest.approx(2, abs=0.1)


@pytest.mark.parametrize("decode", ["every frame", "keyframes only"])
def test_it_keeps_a_three_hour_video_to_its_frame_budget(settings, monkeypatch, long_video, decode):
    settings.MAX_VIDEO_FRAMES = 20
    if decode == "keyframes only":  # what a large video gets; this one is small enough for every frame
        monkeypatch.setattr(video_parser, "FULL_DECODE_PIXELS", 0)
    started = time.monotonic()
    pages = parse(long_video)
    elapsed = time.monotonic() - started
    frames = frame_times(pages)
    assert 10 <= len(frames) <= 20
    assert len(pages) == len({page.meta["t_start"] for page in pages}) <= 20
    assert all(page.meta == {**page.meta, "duration": THREE_HOURS, "has_audio": False} for page in pages)
    assert frames[0][0] == 0
    assert frames[-1][0] > THREE_HOURS * 0.8  # spread over the whole video
    assert elapsed < 20, f"{elapsed:.1f} s for a three-hour video"


def test_it_refuses_a_video_longer_than_the_limit(settings, long_video):
    settings.MAX_MEDIA_MINUTES = 120
    with pytest.raises(ParseError, match=r"180 minutes.*120 minutes \(PORTAL_MAX_MEDIA_MINUTES\)"):
        parse(long_video)


def test_it_reads_srt_cues_with_their_times(tmp_path):
    path = make_srt(tmp_path / "review.srt")
    assert sniff(path) == SRT
    first, second = parse(path)
    assert [(b.kind, b.text, b.t_start, b.t_end) for b in first.blocks] == [
        ("text", "Welcome to the quarterly review.", 1.0, 3.5),
        ("text", "本季度预算已经批准。\n第二行字幕。", 4.0, 6.25),
    ]
    assert (first.number, first.kind, first.meta) == (1, "video_segment", {"t_start": 0.0, "t_end": 60.0})
    assert [(b.text, b.t_start, b.t_end) for b in second.blocks] == [
        ("Travel costs fell by ten percent & more.", 62.5, 65.0)
    ]
    assert (second.number, second.meta["t_start"]) == (2, 60.0)


def test_it_reads_webvtt_cues_and_skips_its_headers_and_notes(tmp_path):
    path = make_vtt(tmp_path / "review.vtt")
    assert sniff(path) == VTT
    first, second = parse(path)
    assert [(b.text, b.t_start, b.t_end) for b in first.blocks] == [
        ("Welcome to the quarterly review.", 1.0, 3.5),
        ("本季度预算已经批准。", 4.0, 6.25),
    ]
    assert [(b.text, b.t_start) for b in second.blocks] == [("Travel costs fell by ten percent.", 62.5)]
    assert "yellow" not in first.text + second.text
    assert "note" not in (first.text + second.text).lower()


def test_it_reads_subtitles_without_blank_lines_between_cues(tmp_path):
    path = make_srt(
        tmp_path / "tight.srt", "1\n00:00:01,000 --> 00:00:02,000\nOne\n2\n00:00:02,000 --> 00:00:03,000\nTwo\n"
    )
    (page,) = parse(path)
    assert [(b.text, b.t_start) for b in page.blocks] == [("One", 1.0), ("Two", 2.0)]


def test_it_refuses_subtitles_without_cues(tmp_path):
    path = make_vtt(tmp_path / "empty.vtt", "WEBVTT\n\nNOTE nothing here\n")
    with pytest.raises(ParseError, match="No subtitles"):
        list(parser_for(VTT).pages(path))


def test_it_reads_a_video_link(tmp_path):
    path = tmp_path / "review.link"
    link = {"url": "https://videos.example.com/v/42", "title": "季度回顾 Q3", "description": "Budget and travel."}
    path.write_text(json.dumps(link, ensure_ascii=False), encoding="utf-8")
    (page,) = parser_for(VIDEO_LINK).pages(path)
    assert (page.number, page.kind, page.meta) == (1, "text_block", {"url": "https://videos.example.com/v/42"})
    assert [(b.kind, b.text, b.level) for b in page.blocks] == [
        ("heading", "季度回顾 Q3", 1),
        ("text", "Budget and travel.", 0),
        ("text", "https://videos.example.com/v/42", 0),
    ]


def test_it_refuses_a_broken_video_link(tmp_path):
    path = tmp_path / "broken.link"
    path.write_bytes(b'{"url": "https://x.example/"')
    with pytest.raises(ParseError, match="video link"):
        list(parser_for(VIDEO_LINK).pages(path))
    path.write_text('{"url": "https://x.example/"}')
    with pytest.raises(ParseError, match="title"):
        list(parser_for(VIDEO_LINK).pages(path))


def test_it_registers_the_media_types():
    assert {MP4, WEBM, MOV, VTT, SRT, VIDEO_LINK} <= set(supported_types())

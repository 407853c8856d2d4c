"""Small real videos, recordings and subtitles for the ingestion tests, made with the ffmpeg
that imageio-ffmpeg ships, Pillow and (where installed) espeak-ng."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

SPOKEN = "The quarterly budget is approved"
FONTS = [
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"),
    Path("/usr/share/fonts/truetype/liberation/LiberationSans-Bold.ttf"),
]
# Container -> (video codec, audio codec) arguments the bundled ffmpeg has.
CODECS = {
    ".mp4": (["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"], ["-c:a", "aac"]),
    ".mov": (["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"], ["-c:a", "aac"]),
    ".webm": (["-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "300k"], ["-c:a", "libvorbis"]),
}


def ffmpeg(*args: str, timeout: float = 120) -> None:
    import imageio_ffmpeg

    command = [imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", "-y", *args]
    subprocess.run(command, check=True, capture_output=True, timeout=timeout)


def slide(text: str, background: tuple[int, int, int], size: tuple[int, int] = (320, 240)) -> bytes:
    """A PNG slide with `text` in big black letters."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", size, background)
    font_path = next((font for font in FONTS if font.exists()), None)
    font = ImageFont.truetype(str(font_path), 34) if font_path else ImageFont.load_default(size=34)
    draw = ImageDraw.Draw(image)
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
    at = ((size[0] - (right - left)) // 2 - left, (size[1] - (bottom - top)) // 2 - top)
    draw.text(at, text, fill=(0, 0, 0), font=font)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def speech(path: Path, text: str = SPOKEN) -> Path | None:
    """`text` spoken by espeak-ng as WAV, or None where espeak-ng is not installed."""
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        return None
    subprocess.run([espeak, "-w", str(path), text], check=True, capture_output=True, timeout=60)
    return path


def make_video(path: Path, *, with_audio: bool = True, seconds: float = 6.0) -> Path:
    """A 320x240 video at 25 fps, its container from `path`'s suffix (.mp4, .mov, .webm):
    a white slide reading "INVOICE 2024", then from half-way a yellow slide reading "BUDGET
    PLAN" (a scene change), with speech (espeak-ng) or else a 440 Hz tone as its sound."""
    half = seconds / 2
    first, second = path.with_suffix(".1.png"), path.with_suffix(".2.png")
    first.write_bytes(slide("INVOICE 2024", (255, 255, 255)))
    second.write_bytes(slide("BUDGET PLAN", (250, 210, 40)))
    args = ["-loop", "1", "-framerate", "25", "-t", f"{half}", "-i", str(first)]
    args += ["-loop", "1", "-framerate", "25", "-t", f"{half}", "-i", str(second)]
    video_codec, audio_codec = CODECS[path.suffix]
    graph, maps = "[0:v][1:v]concat=n=2:v=1:a=0,format=yuv420p[v]", ["-map", "[v]"]
    if with_audio:
        spoken = speech(path.with_suffix(".speech.wav"))
        args += ["-i", str(spoken)] if spoken else ["-f", "lavfi", "-i", f"sine=frequency=440:duration={seconds}"]
        graph += ";[2:a]apad[a]"  # speech shorter than the video: silence after it
        maps += ["-map", "[a]", *audio_codec]
    ffmpeg(*args, "-filter_complex", graph, *maps, *video_codec, "-t", f"{seconds}", str(path))
    for leftover in (first, second, path.with_suffix(".speech.wav")):
        leftover.unlink(missing_ok=True)
    return path


def make_silent_video(path: Path, seconds: float = 6.0) -> Path:
    return make_video(path, with_audio=False, seconds=seconds)


def make_audio_only(path: Path, seconds: float = 3.0) -> Path:
    """Sound without a picture in an MP4 container (.m4a): sniffed as video/mp4."""
    ffmpeg("-f", "lavfi", "-i", f"sine=frequency=440:duration={seconds}", "-c:a", "aac", "-f", "mp4", str(path))
    return path


def make_plain_video(path: Path, seconds: int, *, fps: int = 1, size: str = "64x48", with_audio: bool = False) -> Path:
    """A long, tiny video made fast from ffmpeg's own sources: its colour changes every 5
    seconds (a scene change each time), a keyframe every 10 frames, a tone if `with_audio`."""
    colour = "geq=r='255*mod(floor(T/5),2)':g='255*mod(floor(T/10),2)':b='128'"
    args = ["-f", "lavfi", "-i", f"color=c=black:s={size}:r={fps}:d={seconds},{colour}"]
    if with_audio:
        args += ["-f", "lavfi", "-i", f"sine=frequency=300:duration={seconds}:sample_rate=16000", "-c:a", "aac"]
    video = ["-c:v", "libx264", "-preset", "ultrafast", "-tune", "stillimage", "-g", "10", "-pix_fmt", "yuv420p"]
    ffmpeg(*args, *video, str(path), timeout=300)
    return path


def make_streamed_webm(path: Path, seconds: int = 70) -> Path:
    """A WebM written as a stream (as browsers record): it does not state its length."""
    import imageio_ffmpeg

    command = [imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error"]
    command += [
        "-f",
        "lavfi",
        "-i",
        f"testsrc=s=160x120:r=5:d={seconds}",
        "-f",
        "lavfi",
        "-i",
        f"sine=duration={seconds}",
    ]
    command += ["-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-c:a", "libopus", "-f", "webm", "-"]
    path.write_bytes(subprocess.run(command, check=True, capture_output=True, timeout=120).stdout)
    return path


def make_rotated(source: Path, path: Path, degrees: int = 90) -> Path:
    """`source` as a phone would film it sideways: the same picture with a rotation to display."""
    ffmpeg("-display_rotation:v:0", str(degrees), "-i", str(source), "-c", "copy", str(path))
    return path


SRT_TEXT = """1
00:00:01,000 --> 00:00:03,500
<i>Welcome</i> to the quarterly review.

2
00:00:04,000 --> 00:00:06,250
本季度预算已经批准。
第二行字幕。

3
00:01:02,5 --> 00:01:05,000
{\\an8}Travel costs fell by <b>ten</b> percent &amp; more.
"""

VTT_TEXT = """WEBVTT - the quarterly review
Kind: captions
Language: zh-CN

STYLE
::cue { color: yellow }

NOTE This note spans
two lines and is no cue.

intro
00:01.000 --> 00:03.500 align:start position:10%
<v Alice>Welcome to the quarterly review.</v>

00:00:04.000 --> 00:00:06.250
<c.yellow>本季度预算已经批准。</c>

00:01:02.500 --> 00:01:05.000 line:0
Travel costs fell by ten percent.
"""


def make_srt(path: Path, text: str = SRT_TEXT) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def make_vtt(path: Path, text: str = VTT_TEXT) -> Path:
    path.write_text(text, encoding="utf-8")
    return path

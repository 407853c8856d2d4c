"""Whisper base offline, on a clip the test speaks with espeak-ng."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from providers import speech_to_text
from providers.base import ProviderError


@pytest.fixture
def clip(tmp_path):
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        if os.environ.get("CI"):
            pytest.fail("espeak-ng is required in CI to make the test clip (apt-get install espeak-ng).")
        pytest.skip("espeak-ng is not installed (apt-get install espeak-ng).")
    path = tmp_path / "clip.wav"
    subprocess.run(
        [
            espeak,
            "-s",
            "140",
            "-w",
            str(path),
            "The refund policy allows returns within thirty days. The party is on Friday.",
        ],
        check=True,
    )
    return path


def test_it_transcribes_a_clip_with_timed_segments(clip):
    transcript = speech_to_text().transcribe(clip)
    text = transcript.text.lower()
    assert "refund" in text
    assert "thirty days" in text or "30 days" in text
    assert "party" in text
    assert transcript.language == "en"
    starts = [segment.start for segment in transcript.segments]
    assert starts == sorted(starts)
    assert all(0 <= s.start < s.end < 15 for s in transcript.segments)


def test_it_reports_a_file_that_is_not_audio(tmp_path):
    bogus = tmp_path / "notes.wav"
    bogus.write_text("not audio at all")
    with pytest.raises(ProviderError, match=r"cannot transcribe notes\.wav"):
        speech_to_text().transcribe(bogus)

from __future__ import annotations

import hashlib
import re
import sys

import pytest

from providers.base import ProviderError
from providers.local import model_files
from providers.local.model_files import SplitModel, ensure_model


@pytest.fixture
def split(tmp_path, monkeypatch):
    """Two tiny "model packages" on sys.path holding the halves of a file."""
    chunks = [b"GGUF" + b"a" * 100, b"b" * 50]
    for n, chunk in enumerate(chunks, 1):
        package = tmp_path / "site" / f"fake_model_part{n}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{n:02d}.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    whole = b"".join(chunks)
    yield SplitModel(
        role="chat",
        filename="tiny.gguf",
        parts=tuple((f"fake_model_part{n}", f"data/part{n:02d}.bin") for n in (1, 2)),
        sha256=hashlib.sha256(whole).hexdigest(),
        size=len(whole),
        requirements="the test",
    )
    for n in (1, 2):
        sys.modules.pop(f"fake_model_part{n}", None)


def test_it_joins_and_verifies_once(split, tmp_path, monkeypatch):
    target = ensure_model(split, tmp_path / "models")
    assert target.read_bytes().startswith(b"GGUF")
    assert target.stat().st_size == split.size
    calls = []
    monkeypatch.setattr(model_files, "_verify", lambda *a: calls.append(a))
    assert ensure_model(split, tmp_path / "models") == target
    assert calls == []  # verified before and untouched: not hashed again


def test_it_refuses_a_corrupt_file(split, tmp_path):
    target = ensure_model(split, tmp_path / "models")
    data = bytearray(target.read_bytes())
    data[10] ^= 0xFF
    target.write_bytes(bytes(data))
    with pytest.raises(ProviderError, match=r"is not the expected model.*delete it"):
        ensure_model(split, tmp_path / "models")


def test_it_names_the_missing_package(tmp_path):
    spec = SplitModel(
        role="chat",
        filename="x.gguf",
        parts=(("no_such_model_part1", "data/part01.bin"),),
        sha256="0" * 64,
        size=1,
        requirements="requirements/models.txt",
    )
    with pytest.raises(
        ProviderError, match=re.escape("no_such_model_part1 is not installed: install requirements/models.txt")
    ):
        ensure_model(spec, tmp_path / "models")

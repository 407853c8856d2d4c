"""Upgrade proof: every archive in tests/files/backups/ (made by tests/operations/make_fixture.py
with `manage.py backup` from a portal at the commit its name and manifest give) restores into
today's code, its migrations run, and a search finds what it held."""

from __future__ import annotations

from pathlib import Path

import pytest

from operations import archive
from tests.operations.instances import ROOT, manage, probe, this_instance

FIXTURES = sorted((ROOT / "tests" / "files" / "backups").glob("portal-*.tar"))


def test_there_is_an_archive_of_an_earlier_portal():
    assert FIXTURES
    for path in FIXTURES:
        manifest = archive.Reader(path).manifest
        assert manifest["portal"]["commit"][:12] in path.name


@pytest.mark.parametrize("path", FIXTURES, ids=[path.stem for path in FIXTURES])
@pytest.mark.django_db(transaction=True)
def test_an_archive_of_an_earlier_portal_restores_migrates_and_answers_searches(path: Path, tmp_path, scratch_database):
    manifest = archive.Reader(path).manifest
    target = {
        **this_instance(tmp_path / "var"),
        "DATABASE_URL": scratch_database,
        "MEDIA_ROOT": str(tmp_path / "media"),
    }
    restored = manage(target, "restore", str(path))
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert f"Verified: {manifest['counts']['documents']} documents" in restored.stdout
    migrated = manage(target, "migrate", "--check")
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr

    found = probe(target, "ada", "parking permit price", "停车证 续办", "Travel costs are refunded")
    names = found["documents"]
    assert [names[str(hits[0][0])] for hits in found["searches"]] == ["parking.md", "parking.md", "travel.pdf"]
    assert found["renders"]
    assert all(status == 200 for status, _digest in found["renders"].values())

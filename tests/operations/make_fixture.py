"""Makes the upgrade-proof archive in tests/files/backups/: a small portal (one user, one
collection, a Markdown file, a one-page PDF with a picture, a PNG), backed up by
`manage.py backup` from the code checked out now. Run it from a clean checkout of a released
commit, against an empty database, then keep the archive it prints:

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/portal_fixture \\
    PORTAL_VAR_DIR=/tmp/fixture-var .venv/bin/python tests/operations/make_fixture.py

tests/operations/test_upgrade.py restores every archive there into today's code."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "files" / "backups"
MARKDOWN = (
    "# Parking\n\nA parking permit costs 40 euros a month and is renewed every January.\n\n"
    "# 停车\n\n停车证每月四十欧元，每年一月续办。\n"
).encode()


def main() -> Path:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from knowledge.models import Collection
    from operations.backup import make_backup
    from tests.conftest import make_collection, make_user
    from tests.ingestion.files import ingest, png
    from tests.storage.s3 import text_pdf

    call_command("migrate", interactive=False, verbosity=0)
    if Collection.objects.exists():
        raise SystemExit("The database is not empty: make the fixture in an empty one.")
    collection = make_collection(make_user("ada"), "Fixture handbook")
    ingest(collection, "parking.md", MARKDOWN)
    ingest(collection, "travel.pdf", text_pdf(1))
    ingest(collection, "blue.png", png(96, 64))
    made = make_backup(OUT, say=print)
    commit = made.manifest["portal"]["commit"][:12] or "unknown"
    final = made.path.with_name(f"portal-{commit}.tar")
    made.path.rename(final)
    return final


if __name__ == "__main__":
    print(main())

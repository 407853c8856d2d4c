"""Other portal instances for the backup tests: `manage.py` and the probe run in processes of
their own, with the environment an operator would give them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings

from tests.stack import test_database_url

ROOT = Path(__file__).resolve().parents[2]


def probe(environ: dict[str, str], username: str, *queries: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests/operations/probe.py"), username, *queries],
        env={**environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def manage(environ: dict[str, str], *args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=environ,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def this_instance(var_dir: Path) -> dict[str, str]:
    """The environment of the test database's portal (local files under MEDIA_ROOT)."""
    return {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "PORTAL_VAR_DIR": str(var_dir),
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "SECRET_KEY": settings.SECRET_KEY,
        "PORTAL_SOURCE_ROOTS": ",".join(settings.SOURCE_ROOTS),
        "PORTAL_STORAGE": "local",
        "MEM0_TELEMETRY": "False",
    }

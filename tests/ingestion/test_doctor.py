"""`manage.py doctor`: nothing wrong and exit 0 on a healthy instance; each stuck state named
and a non-zero exit; `--fix` mends them, after which it finds nothing wrong."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from ingestion import actions
from ingestion.models import Finding, IngestionRun
from knowledge.models import Document
from tests.ingestion.runs import drain

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]


def doctor(*args: str) -> str:
    out = StringIO()
    call_command("doctor", *args, stdout=out)
    return out.getvalue()


def test_it_says_nothing_wrong_on_a_healthy_instance(private_collection):
    actions.do_add_document(private_collection, "a.md", b"# A\n\nThe ferry leaves at nine.", enqueue=False)
    drain(private_collection)
    assert doctor() == "Nothing wrong.\n"


def test_it_names_each_stuck_state_exits_non_zero_and_fix_mends_them(private_collection):
    stuck, stuck_run = actions.do_add_document(private_collection, "stuck.md", b"# Stuck\n\nOne.", enqueue=False)
    _silent, silent_run = actions.do_add_document(private_collection, "silent.md", b"# Silent\n\nTwo.", enqueue=False)
    assert stuck_run is not None
    assert silent_run is not None
    IngestionRun.objects.filter(pk=stuck_run.pk).update(status="succeeded", finished_at=timezone.now())
    IngestionRun.objects.filter(pk=silent_run.pk).update(
        status="running", heartbeat_at=timezone.now() - timedelta(hours=1)
    )

    out = StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("doctor", stdout=out)

    assert raised.value.returncode == 1
    assert "2 thing(s) stuck" in str(raised.value)
    printed = out.getvalue()
    assert f"run_silent: run {silent_run.pk} " in printed
    assert "its worker gave no sign of life for 10 minutes" in printed
    assert f"document_stuck: document {stuck.pk} “stuck.md”: its last run ended without finishing it" in printed
    assert not Finding.objects.exists()  # without --fix it only looks

    fixed = doctor("--fix")

    assert fixed.count("→ Sent back") == 2
    assert IngestionRun.objects.get(pk=silent_run.pk).status == "queued"
    assert IngestionRun.objects.filter(document=stuck, status="queued").exists()
    assert doctor() == "Nothing wrong.\n"
    drain(private_collection)
    assert set(Document.objects.values_list("status", flat=True)) == {"ready"}

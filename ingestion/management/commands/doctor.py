"""`manage.py doctor [--fix]`: the reconciler's checks (ingestion/reconcile.py) for an operator.
Prints each finding and exits 1 when anything is stuck, 0 with "Nothing wrong." otherwise;
`--fix` mends each finding as beat's reconciler would (sent back, stopped, finished, or failed
after PORTAL_RECONCILE_TRIES) and prints what it did."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _
from kombu.exceptions import OperationalError

from ingestion import reconcile


class Command(BaseCommand):
    help = "Find ingestion that is stuck (documents, runs, split parts, index versions); --fix mends it."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--fix", action="store_true", help="send back, stop or fail each finding")

    def handle(self, *args: Any, fix: bool = False, **options: Any) -> None:
        broker = ""
        try:
            idle = reconcile.broker_idle()
        except (OperationalError, OSError) as exc:
            idle, broker = False, str(exc)  # queued runs cannot be told lost without the broker
        problems = reconcile.find(broker_idle=idle)
        if broker:
            self.stdout.write(_("The broker (Redis) did not answer: %(error)s") % {"error": broker})
        elif not problems:
            self.stdout.write(_("Nothing wrong."))
            return
        for problem in problems:
            line = f"{problem.kind}: {problem.subject()}: {problem.reason}"
            if fix:
                finding = reconcile.mend(problem)
                line += " → " + (finding.get_outcome_display() if finding else _("mended itself meanwhile"))
            self.stdout.write(line)
        if broker or not fix:
            raise CommandError(
                _("%(count)d thing(s) stuck; `manage.py doctor --fix` mends them.") % {"count": len(problems)}
                if problems
                else _("The broker must answer for the checks to be whole."),
                returncode=1,
            )

"""A source's schedule: empty (synced only by hand), an interval ("30m", "6h", "1d"), or
five cron fields ("0 3 * * 1-5": minute, hour, day of month, month, day of week), read by
Celery's own crontab in the portal's time zone (TIME_ZONE)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from celery.schedules import crontab
from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

INTERVAL = re.compile(r"^(\d+)\s*(m|min|h|d)$")
UNITS = {"m": 60, "min": 60, "h": 3600, "d": 86400}
SHORTEST = timedelta(minutes=5)


def check(schedule: str) -> str:
    """The schedule tidied, or ValidationError saying how to write one."""
    schedule = " ".join(schedule.split())
    if schedule:
        next_after(schedule, datetime.now(ZoneInfo(settings.TIME_ZONE)))
    return schedule


def next_after(schedule: str, moment: datetime) -> datetime | None:
    """When the source is next due after `moment` (None: only by hand)."""
    schedule = " ".join(schedule.split())
    if not schedule:
        return None
    interval = INTERVAL.match(schedule.lower())
    if interval:
        every = timedelta(seconds=int(interval[1]) * UNITS[interval[2]])
        if every < SHORTEST:
            raise ValidationError(_("Sync at most every 5 minutes (“5m”)."))
        return moment + every
    fields = schedule.split(" ")
    if len(fields) != 5:
        raise ValidationError(
            _(
                "Write an interval such as “30m”, “6h” or “1d”, or five cron fields such as “0 3 * * 1-5” "
                "(minute, hour, day of month, month, day of week)."
            )
        )
    local = moment.astimezone(ZoneInfo(settings.TIME_ZONE))
    try:
        minute, hour, day_of_month, month_of_year, day_of_week = fields  # cron's order, not crontab's
        cron = crontab(
            minute=minute,
            hour=hour,
            day_of_month=day_of_month,
            month_of_year=month_of_year,
            day_of_week=day_of_week,
            nowfun=lambda: local,
        )
        return local + cron.remaining_estimate(local)
    except ValueError as exc:
        raise ValidationError(_("The cron fields are not valid: %(error)s") % {"error": exc}) from None

"""A source's schedule: empty (synced only by hand), an interval ("30m", "6h", "1d"), or
five cron fields ("0 3 * * 1-5": minute, hour, day of month, month, day of week), read by
Celery's own crontab in the portal's time zone (TIME_ZONE).

Both kinds are held to the same bounds: syncs at least SHORTEST apart (a cron schedule's
shortest gap between two firings counts, so "* * * * *" is refused as "1m" is), and an
interval at most LONGEST (a longer one would overflow the date arithmetic)."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

from celery.schedules import crontab
from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

INTERVAL = re.compile(r"^(\d+)\s*(m|min|h|d)$")
UNITS = {"m": 60, "min": 60, "h": 3600, "d": 86400}
SHORTEST = timedelta(minutes=5)
LONGEST = timedelta(days=365)
# Enough days to meet every pair of consecutive dates a crontab's day fields can allow
# (a leap day included).
DAYS_SEEN = 4 * 366


def check(schedule: str) -> str:
    """The schedule tidied, or ValidationError saying how to write one."""
    schedule = " ".join(schedule.split())
    if not schedule:
        return schedule
    interval = INTERVAL.match(schedule.lower())
    if interval:
        _interval(interval)
        return schedule
    cron = parse_cron(schedule, datetime.now(ZoneInfo(settings.TIME_ZONE)))
    gap = shortest_gap(cron)
    if gap < SHORTEST:
        minutes = int(gap.total_seconds() // 60)
        raise ValidationError(
            ngettext(
                "These cron fields start a sync %(gap)d minute after another; a source syncs at most every "
                "%(minimum)d minutes (“*/%(minimum)d * * * *”).",
                "These cron fields start a sync %(gap)d minutes after another; a source syncs at most every "
                "%(minimum)d minutes (“*/%(minimum)d * * * *”).",
                minutes,
            )
            % {"gap": minutes, "minimum": _minutes(SHORTEST)}
        )
    next_after(schedule, datetime.now(ZoneInfo(settings.TIME_ZONE)))  # what saving works out must work
    return schedule


def next_after(schedule: str, moment: datetime) -> datetime | None:
    """When the source is next due after `moment` (None: only by hand). A cron schedule
    stored before the minimum held for cron fields is still kept SHORTEST apart here."""
    schedule = " ".join(schedule.split())
    if not schedule:
        return None
    interval = INTERVAL.match(schedule.lower())
    if interval:
        return moment + _interval(interval)
    local = moment.astimezone(ZoneInfo(settings.TIME_ZONE))
    cron = parse_cron(schedule, local)
    try:
        due = local + cron.remaining_estimate(local)
    except (ValueError, OverflowError) as exc:
        raise ValidationError(_("The cron fields are not valid: %(error)s") % {"error": exc}) from None
    return max(due, moment + SHORTEST) if shortest_gap(cron) < SHORTEST else due


def shortest_gap(cron: crontab) -> timedelta:
    """The shortest time between two consecutive firings of the crontab (an hour when every
    gap is at least that). Within an hour it is the closest two minutes; from one hour to
    the next it is the last minute to the first, which counts only where two consecutive
    hours fire: h and h+1 of a day, or 23 of one firing day and 0 of the next."""
    minutes = sorted(_field(cron, "minute"))
    gaps = [later - earlier for earlier, later in pairwise(minutes)]
    hours = _field(cron, "hour")
    if any(hour + 1 in hours for hour in hours) or ({0, 23} <= hours and _consecutive_days(cron)):
        gaps.append(60 - minutes[-1] + minutes[0])
    return timedelta(minutes=min(gaps, default=60))


def _consecutive_days(cron: crontab) -> bool:
    """Whether two consecutive dates both fire (Celery requires the day of the month, the
    month and the day of the week to match all three; its weeks start on Sunday, 0)."""
    days, months, weekdays = (_field(cron, name) for name in ("day_of_month", "month_of_year", "day_of_week"))
    start = date(2024, 1, 1)
    fires = [
        day.day in days and day.month in months and day.isoweekday() % 7 in weekdays
        for day in (start + timedelta(days=n) for n in range(DAYS_SEEN))
    ]
    return any(today and tomorrow for today, tomorrow in pairwise(fires))


def _field(cron: crontab, name: str) -> set[int]:
    # crontab expands each field into a set of numbers in __init__; celery's type stubs do
    # not declare those attributes.
    return set(getattr(cron, name))


def _interval(match: re.Match[str]) -> timedelta:
    seconds = int(match[1]) * UNITS[match[2]]
    if seconds < SHORTEST.total_seconds():
        minimum = _minutes(SHORTEST)
        raise ValidationError(_("Sync at most every %(minimum)d minutes (“%(minimum)dm”).") % {"minimum": minimum})
    if seconds > LONGEST.total_seconds():
        raise ValidationError(
            _("Sync at least every %(days)d days (“%(days)dd”), or leave the schedule empty to sync only by hand.")
            % {"days": LONGEST.days}
        )
    return timedelta(seconds=seconds)


def parse_cron(schedule: str, local: datetime) -> crontab:
    """Five cron fields as Celery's crontab, evaluated at `local`; ValidationError when they are not."""
    fields = schedule.split(" ")
    if len(fields) != 5:
        raise ValidationError(
            _(
                "Write an interval such as “30m”, “6h” or “1d”, or five cron fields such as “0 3 * * 1-5” "
                "(minute, hour, day of month, month, day of week)."
            )
        )
    minute, hour, day_of_month, month_of_year, day_of_week = fields  # cron's order, not crontab's
    try:
        return crontab(
            minute=minute,
            hour=hour,
            day_of_month=day_of_month,
            month_of_year=month_of_year,
            day_of_week=day_of_week,
            nowfun=lambda: local,
        )
    except ValueError as exc:
        raise ValidationError(_("The cron fields are not valid: %(error)s") % {"error": exc}) from None


def _minutes(span: timedelta) -> int:
    return int(span.total_seconds() // 60)

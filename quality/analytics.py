"""What admins see of how a collection (or a team's collections) is used and answers: the
numbers of the Analytics pages, their CSV and the analytics API, all computed in SQL.

The scope: the answers (assistant messages) whose `searched` names one of the collections,
made within the period. An answer that searched several of them counts once.

- **questions**: every answer in the scope, failed or cancelled ones included (one answer
  per question asked); per day too, in the portal's time zone;
- **answers**: the questions whose answer did not fail (`error` empty);
- **failed**: the questions whose answer failed or was cancelled;
- **abstention rate**: abstained answers / answers;
- **thumbs-down rate**: answers rated "down" / answers rated at all (feedback on a failed
  answer counts too: it is what the person saw); `rated` says how many that is;
- **median and p95 answer time**: of `timings["total"]` (milliseconds) over the answers that
  have one, as PostgreSQL's `percentile_cont`: the value at rank p·(n−1) of the sorted
  times (0-based), interpolated linearly between the two nearest (numpy's default "linear");
- **most cited documents**: for each document still in one of the collections, the number
  of answers citing it (an answer citing three of its pages counts once), with its name now;
- **questions with no good passage**: the questions whose answer (not failed) abstained or
  cited nothing: grouped by their text (case and spaces ignored), with how often each was
  asked and how often the portal abstained, the most recently asked first: candidates for
  new documents.

The period is whole days in the portal's time zone, `since` and `until` included (`Period`).

The CSV (`csv_text`) is one file in sections, each a title row (one cell), a header row
and its rows, with an empty row between sections: "summary" (metric, value), "days" (day,
questions, answers, failed, abstained, thumbs_down), "collections" (the same numbers as the
summary per collection: only in a report of several), "most cited documents" (document_id,
document, collection_id, collection, answers) and "questions with no good passage"
(question, times, abstained, last_asked)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from django import forms
from django.db import connection
from django.http import HttpResponse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext_lazy

from assistant.models import Message
from knowledge.api.audit import FORMULA_STARTS
from knowledge.models import Collection, Document
from quality.models import Feedback

DAYS = (7, 30, 90)
DEFAULT_DAYS = 30
MAX_DAYS = 366
TOP_CITED = 10
TOP_UNANSWERED = 20


@dataclass(frozen=True)
class Period:
    """Whole days in the portal's time zone, both ends included."""

    since: dt.date
    until: dt.date

    @classmethod
    def last(cls, days: int, today: dt.date | None = None) -> Period:
        until = today or timezone.localdate()
        return cls(until - dt.timedelta(days=days - 1), until)

    @property
    def days(self) -> int:
        return (self.until - self.since).days + 1

    def bounds(self) -> tuple[dt.datetime, dt.datetime]:
        """[start, end): midnight of `since` to midnight after `until`, aware."""
        zone = timezone.get_current_timezone()
        start = dt.datetime.combine(self.since, dt.time(), tzinfo=zone)
        end = dt.datetime.combine(self.until + dt.timedelta(days=1), dt.time(), tzinfo=zone)
        return start, end

    def each_day(self) -> list[dt.date]:
        return [self.since + dt.timedelta(days=offset) for offset in range(self.days)]


# Lazy to the end (a plain lazy string formatted here would be English for good).
LAST_DAYS = ngettext_lazy("Last %(days)s day", "Last %(days)s days", "days")


class PeriodForm(forms.Form):
    """The period of a report from the query string: `days` (7, 30 or 90; 30 by default), or
    `since` and/or `until` dates, which win over `days` when given (`since` alone runs to
    today, `until` alone covers the 30 days up to it)."""

    days = forms.TypedChoiceField(
        label=_("Period"),
        choices=[(days, LAST_DAYS % {"days": days}) for days in DAYS],
        coerce=int,
        required=False,
        empty_value=None,
    )
    since = forms.DateField(label=_("From"), required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(label=_("To"), required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        since: dt.date | None = data.get("since")
        until: dt.date | None = data.get("until")
        if since is None and until is None:
            data["period"] = Period.last(data.get("days") or DEFAULT_DAYS)
            return data
        if since is not None and until is not None and since > until:
            raise forms.ValidationError(_("The first day comes after the last one: swap them."))
        if until is None:
            until = max(since or timezone.localdate(), timezone.localdate())
        period = Period(since or until - dt.timedelta(days=DEFAULT_DAYS - 1), until)
        if period.days > MAX_DAYS:
            raise forms.ValidationError(
                _("A report covers at most %(days)s days: choose a shorter period.") % {"days": MAX_DAYS}
            )
        data["period"] = period
        return data

    def period(self) -> Period:
        """The chosen period (the form is valid)."""
        period: Period = self.cleaned_data["period"]
        return period


@dataclass
class Numbers:
    """The counts and rates of a scope (a report's summary, or one collection's row)."""

    questions: int = 0
    answers: int = 0
    failed: int = 0
    abstained: int = 0
    rated: int = 0
    thumbs_down: int = 0
    timed: int = 0  # answers with a total time
    median_ms: float | None = None
    p95_ms: float | None = None

    @property
    def abstention_rate(self) -> float | None:
        return self.abstained / self.answers if self.answers else None

    @property
    def thumbs_down_rate(self) -> float | None:
        return self.thumbs_down / self.rated if self.rated else None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "abstention_rate": self.abstention_rate, "thumbs_down_rate": self.thumbs_down_rate}


@dataclass
class Day:
    day: dt.date
    questions: int = 0
    answers: int = 0
    failed: int = 0
    abstained: int = 0
    thumbs_down: int = 0


@dataclass
class CollectionRow:
    collection_id: int
    name: str
    numbers: Numbers


@dataclass
class Cited:
    document_id: int
    name: str
    collection_id: int
    collection: str
    answers: int


@dataclass
class Unanswered:
    question: str  # as most recently asked
    times: int
    abstained: int
    last_asked: dt.datetime


@dataclass
class Report:
    period: Period
    collections: list[CollectionRow]
    summary: Numbers
    days: list[Day] = field(default_factory=list)
    cited: list[Cited] = field(default_factory=list)
    unanswered: list[Unanswered] = field(default_factory=list)

    @property
    def busiest_day(self) -> int:
        return max((day.questions for day in self.days), default=0)

    @property
    def day_rows(self) -> list[Day | QuietDays]:
        """The days as the page lists them: QUIET_RUN or more days in a row without a question
        are one row, so that a quiet month does not push the tables below out of sight."""
        rows: list[Day | QuietDays] = []
        quiet: list[Day] = []
        for day in [*self.days, None]:
            if day is not None and not day.questions:
                quiet.append(day)
                continue
            if len(quiet) >= QUIET_RUN:
                rows.append(QuietDays(quiet[0].day, quiet[-1].day, len(quiet)))
            else:
                rows += quiet
            quiet = []
            if day is not None:
                rows.append(day)
        return rows


QUIET_RUN = 3


@dataclass(frozen=True)
class QuietDays:
    first: dt.date
    last: dt.date
    count: int
    quiet = True


def collection_report(collection_ids: Sequence[int], since: dt.date, until: dt.date) -> Report:
    """The report on the answers that searched any of these collections from `since` to
    `until` (days in the portal's time zone, both included). The caller has checked that
    the user may manage every one of them."""
    period = Period(since, until)
    ids = sorted({int(pk) for pk in collection_ids})
    names = dict(Collection.objects.filter(pk__in=ids).values_list("pk", "name"))
    ids = [pk for pk in ids if pk in names]
    scope = _Scope(ids, period)
    rows = scope.per_collection() if len(ids) > 1 else []
    return Report(
        period=period,
        collections=[CollectionRow(pk, names[pk], numbers) for pk, numbers in rows],
        summary=scope.summary(),
        days=scope.days(),
        cited=scope.cited(),
        unanswered=scope.unanswered(),
    )


MESSAGE = Message._meta.db_table
FEEDBACK = Feedback._meta.db_table
DOCUMENT = Document._meta.db_table
COLLECTION = Collection._meta.db_table

# `timings->'total'` as milliseconds where it is a number (NULL otherwise: never a cast error).
TOTAL_MS = "CASE WHEN jsonb_typeof(m.timings -> 'total') = 'number' THEN (m.timings ->> 'total')::float END"
CITATIONS = "CASE WHEN jsonb_typeof(m.citations) = 'array' THEN m.citations ELSE '[]'::jsonb END"
NUMBERS = f"""
    count(*),
    count(*) FILTER (WHERE m.error = ''),
    count(*) FILTER (WHERE m.error <> ''),
    count(*) FILTER (WHERE m.error = '' AND m.abstain),
    count(f.id),
    count(f.id) FILTER (WHERE f.rating = 'down'),
    count({TOTAL_MS}) FILTER (WHERE m.error = ''),
    percentile_cont(0.5) WITHIN GROUP (ORDER BY {TOTAL_MS}) FILTER (WHERE m.error = ''),
    percentile_cont(0.95) WITHIN GROUP (ORDER BY {TOTAL_MS}) FILTER (WHERE m.error = '')
"""


class _Scope:
    """The SQL over the answers in scope: `WHERE` of `m` (the message) and its parameters."""

    def __init__(self, ids: list[int], period: Period) -> None:
        self.ids = ids
        self.period = period
        start, end = period.bounds()
        # searched @> '[{"id": 7}]' for any of the collections: JSONB containment, in SQL.
        needles = [json.dumps([{"id": pk}]) for pk in ids]
        self.where = (
            "m.role = 'assistant' AND m.created_at >= %s AND m.created_at < %s AND m.searched @> ANY(%s::jsonb[])"
        )
        self.params: list[Any] = [start, end, needles]

    def _rows(self, sql: str, before: Iterable[Any] = (), after: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of `sql`: its parameters are `before`, the scope's (in `where`), `after`."""
        if not self.ids:
            return []
        with connection.cursor() as cursor:
            cursor.execute(sql, [*before, *self.params, *after])
            return list(cursor.fetchall())

    def summary(self) -> Numbers:
        rows = self._rows(
            f"SELECT {NUMBERS} FROM {MESSAGE} m LEFT JOIN {FEEDBACK} f ON f.message_id = m.id WHERE {self.where}"  # noqa: S608
        )
        return _numbers(rows[0]) if rows else Numbers()

    def per_collection(self) -> list[tuple[int, Numbers]]:
        """The same numbers for each collection: an answer that searched two counts in both."""
        rows = self._rows(
            f"""
            SELECT c.id, {NUMBERS}
            FROM unnest(%s::bigint[]) AS c(id)
            JOIN {MESSAGE} m ON m.searched @> jsonb_build_array(jsonb_build_object('id', c.id))
            LEFT JOIN {FEEDBACK} f ON f.message_id = m.id
            WHERE {self.where}
            GROUP BY c.id
            """,  # noqa: S608 (constants; values are parameters)
            before=[self.ids],
        )
        found = {int(row[0]): _numbers(row[1:]) for row in rows}
        return [(pk, found.get(pk, Numbers())) for pk in self.ids]

    def days(self) -> list[Day]:
        """Every day of the period, those without questions too."""
        rows = self._rows(
            f"""
            SELECT (m.created_at AT TIME ZONE %s)::date AS day,
                   count(*),
                   count(*) FILTER (WHERE m.error = ''),
                   count(*) FILTER (WHERE m.error <> ''),
                   count(*) FILTER (WHERE m.error = '' AND m.abstain),
                   count(f.id) FILTER (WHERE f.rating = 'down')
            FROM {MESSAGE} m LEFT JOIN {FEEDBACK} f ON f.message_id = m.id
            WHERE {self.where}
            GROUP BY day
            """,  # noqa: S608 (constants; values are parameters)
            before=[timezone.get_current_timezone_name()],
        )
        found = {row[0]: Day(*row) for row in rows}
        return [found.get(day, Day(day)) for day in self.period.each_day()]

    def cited(self) -> list[Cited]:
        """The documents still in these collections that answers cite, by answers citing them."""
        rows = self._rows(
            f"""
            SELECT d.id, d.name, c.id, c.name, count(DISTINCT m.id) AS answers
            FROM {MESSAGE} m
            CROSS JOIN LATERAL jsonb_array_elements({CITATIONS}) AS cite(value)
            JOIN {DOCUMENT} d ON d.id::text = cite.value ->> 'document_id'
            JOIN {COLLECTION} c ON c.id = d.collection_id
            WHERE {self.where} AND m.error = '' AND d.collection_id = ANY(%s)
            GROUP BY d.id, d.name, c.id, c.name
            ORDER BY answers DESC, d.name, d.id
            LIMIT %s
            """,  # noqa: S608 (constants; values are parameters)
            after=[self.ids, TOP_CITED],
        )
        return [Cited(*row) for row in rows]

    def unanswered(self) -> list[Unanswered]:
        """The questions (the user message before each answer) whose answer abstained or
        cited nothing, by their text with case and runs of spaces ignored."""
        rows = self._rows(
            f"""
            WITH missed AS (
                SELECT q.content, m.abstain, m.created_at,
                       lower(regexp_replace(btrim(q.content), '\\s+', ' ', 'g')) AS normal
                FROM {MESSAGE} m
                CROSS JOIN LATERAL (
                    SELECT u.content FROM {MESSAGE} u
                    WHERE u.conversation_id = m.conversation_id AND u.role = 'user' AND u.id < m.id
                    ORDER BY u.id DESC LIMIT 1
                ) AS q
                WHERE {self.where} AND m.error = ''
                  AND (m.abstain OR jsonb_array_length({CITATIONS}) = 0)
            )
            SELECT (array_agg(content ORDER BY created_at DESC))[1], count(*),
                   count(*) FILTER (WHERE abstain), max(created_at) AS last_asked
            FROM missed
            WHERE normal <> ''
            GROUP BY normal
            ORDER BY last_asked DESC
            LIMIT %s
            """,  # noqa: S608 (constants; values are parameters)
            after=[TOP_UNANSWERED],
        )
        return [Unanswered(*row) for row in rows]


def _numbers(row: Sequence[Any]) -> Numbers:
    return Numbers(*[int(value) for value in row[:7]], *[None if v is None else float(v) for v in row[7:9]])


def as_json(report: Report) -> dict[str, Any]:
    """The report as the API answers it."""
    return {
        "since": report.period.since,
        "until": report.period.until,
        "collections": [
            {"id": row.collection_id, "name": row.name, **row.numbers.as_dict()} for row in report.collections
        ],
        **report.summary.as_dict(),
        "days": [asdict(day) for day in report.days],
        "most_cited": [asdict(cited) for cited in report.cited],
        "no_good_passage": [asdict(question) for question in report.unanswered],
    }


SUMMARY_COLUMNS = [
    "questions", "answers", "failed", "abstained", "abstention_rate", "rated", "thumbs_down", "thumbs_down_rate",
    "timed", "median_ms", "p95_ms",
]  # fmt: skip


def csv_response(report: Report, title: str, slug: str) -> HttpResponse:
    """The CSV file as a download named after the scope (`slug`) and the period."""
    response = HttpResponse(csv_text(report, title), content_type="text/csv; charset=utf-8")
    name = f"analytics-{slug}-{report.period.since}-{report.period.until}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def csv_text(report: Report, title: str) -> str:
    """The report as one CSV file in sections (the module's docstring)."""
    out = io.StringIO()
    writer = csv.writer(out)
    numbers = report.summary.as_dict()
    writer.writerow(["summary"])
    writer.writerow(["metric", "value"])
    writer.writerows(
        [
            ["report", _cell(title)],
            ["since", report.period.since.isoformat()],
            ["until", report.period.until.isoformat()],
            *[[column, _number(column, numbers[column])] for column in SUMMARY_COLUMNS],
        ]
    )
    writer.writerow([])
    writer.writerow(["days"])
    writer.writerow(["day", "questions", "answers", "failed", "abstained", "thumbs_down"])
    for day in report.days:
        writer.writerow([day.day.isoformat(), day.questions, day.answers, day.failed, day.abstained, day.thumbs_down])
    if report.collections:
        writer.writerow([])
        writer.writerow(["collections"])
        writer.writerow(["collection_id", "collection", *SUMMARY_COLUMNS])
        for row in report.collections:
            values = row.numbers.as_dict()
            writer.writerow([row.collection_id, _cell(row.name), *[_number(c, values[c]) for c in SUMMARY_COLUMNS]])
    writer.writerow([])
    writer.writerow(["most cited documents"])
    writer.writerow(["document_id", "document", "collection_id", "collection", "answers"])
    for cited in report.cited:
        writer.writerow(
            [cited.document_id, _cell(cited.name), cited.collection_id, _cell(cited.collection), cited.answers]
        )
    writer.writerow([])
    writer.writerow(["questions with no good passage"])
    writer.writerow(["question", "times", "abstained", "last_asked"])
    for question in report.unanswered:
        writer.writerow([_cell(question.question), question.times, question.abstained, question.last_asked.isoformat()])
    return out.getvalue()


def _number(column: str, value: Any) -> Any:
    """Rates with 4 decimals, times with 1; empty where there is nothing to measure."""
    if value is None:
        return ""
    if column.endswith("_rate"):
        return f"{value:.4f}"
    if column.endswith("_ms"):
        return f"{value:.1f}"
    return value


def _cell(value: str) -> str:
    """Text a spreadsheet would run as a formula (CSV injection) gets a leading apostrophe."""
    return "'" + value if value.startswith(FORMULA_STARTS) else value

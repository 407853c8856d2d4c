"""Analytics for admins (quality/analytics.py): every number checked by hand on answers built
directly, per collection and per team, on the pages, their CSV and the API.

alice administers "Research" (bob is a viewer there) with collections A ("Team handbook")
and B ("Policies"); charlie's team "Elsewhere" has collection X. Answers, by days ago:

    #   searched  days  user   outcome                          total ms   cites        feedback
    1   A         0     alice  answered                         1000       a1 p1, a1 p2, gone   up
    2   A+B       1     bob    answered                         2000       a1, b1       down
    3   A         3     alice  abstained "What is the parking policy?"   3000   -       down
    4   A         2     bob    abstained "what is  the Parking policy? " 4000   -       -
    5   A         1     alice  failed (cancelled)               100000     a1           down
    6   A         5     bob    answered, cites nothing          5000       -            -
    7   A         40    alice  answered                         99999      a2           -
    8   X         1     charlie abstained                       8000       x            down
    9   A+X       10    charlie answered                        6000       a2, x        -
    10  A         20    alice  answered                         "n/a"      a1           -
    11  B         2     alice  answered                         7000       b1           -

Percentiles are PostgreSQL's percentile_cont: the value at rank p·(n−1) of the sorted
times, interpolated linearly (`percentile` below)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import re
from collections.abc import Sequence
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from assistant.models import Conversation, Message
from knowledge import actions
from knowledge.models import Document, Role
from quality import analytics
from quality.models import Feedback
from tests.conftest import make_collection, make_user, set_role, token_for


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    rank = p * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (rank - low) * (ordered[high] - ordered[low])


def test_the_percentile_is_the_linear_one():
    assert percentile([1000, 2000, 3000, 4000, 5000, 6000], 0.5) == 3500
    assert percentile([1000, 2000, 3000, 4000, 5000, 6000], 0.95) == pytest.approx(5750)
    assert percentile([7], 0.95) == 7


def _at(days_ago: int, hour: int = 12) -> dt.datetime:
    day = timezone.localdate() - dt.timedelta(days=days_ago)
    return dt.datetime.combine(day, dt.time(hour), tzinfo=timezone.get_current_timezone())


def _document(collection, name: str) -> Document:
    return Document.objects.create(collection=collection, name=name, rel_path=name, sha256="0" * 64, size=1, mime="")


def _cite(document: Document, page: int = 1) -> dict[str, Any]:
    return {"document_id": document.pk, "file": document.name, "collection_id": document.collection_id, "page": page}


class World:
    """The answers of the module's table, and a way to ask more."""

    def __init__(self, alice, bob, charlie, team) -> None:
        self.alice, self.bob, self.charlie, self.team = alice, bob, charlie, team
        self.a = make_collection(alice, "Team handbook", team=team)
        self.b = make_collection(alice, "Policies", team=team)
        self.elsewhere = actions.do_create_team(charlie, "Elsewhere")
        self.x = make_collection(charlie, "Charlie's files", team=self.elsewhere)
        self.a1, self.a2 = _document(self.a, "vacation.pdf"), _document(self.a, "travel.pdf")
        self.b1, self.xdoc = _document(self.b, "rules.pdf"), _document(self.x, "charlie-secret.pdf")
        gone = _document(self.a, "gone.pdf")
        self.conversations: dict[int, Conversation] = {}
        self.answers: dict[int, Message] = {}
        A, B, X = [self.a], [self.b], [self.x]  # noqa: N806
        self.ask(1, alice, "How many vacation days?", A, 0, total=1000,
                 cites=[_cite(self.a1, 1), _cite(self.a1, 2), _cite(gone)], rating="up")  # fmt: skip
        self.ask(2, bob, "Who approves travel?", A + B, 1, total=2000, cites=[_cite(self.a1), _cite(self.b1)],
                 rating="down")  # fmt: skip
        self.ask(3, alice, "What is the parking policy?", A, 3, total=3000, abstain=True, rating="down")
        self.ask(4, bob, "what is  the Parking policy? ", A, 2, total=4000, abstain=True)
        self.ask(5, alice, "Explain the budget", A, 1, total=100000, cites=[_cite(self.a1)], error="Cancelled.",
                 rating="down")  # fmt: skip
        self.ask(6, bob, "Where is the handbook?", A, 5, total=5000)
        self.ask(7, alice, "An old question", A, 40, total=99999, cites=[_cite(self.a2)])
        self.ask(8, charlie, "charlie's secret question", X, 1, total=8000, abstain=True, cites=[_cite(self.xdoc)],
                 rating="down")  # fmt: skip
        self.ask(9, charlie, "Travel and more", A + X, 10, total=6000, cites=[_cite(self.a2), _cite(self.xdoc)])
        self.ask(10, alice, "Vacation again", A, 20, total="n/a", cites=[_cite(self.a1)])
        self.ask(11, alice, "Rules?", B, 2, total=7000, cites=[_cite(self.b1)])
        gone.delete()

    def ask(
        self,
        number: int,
        user,
        question: str,
        collections: list[Any],
        days_ago: int,
        *,
        total: Any,
        cites: list[dict[str, Any]] | None = None,
        abstain: bool = False,
        error: str = "",
        rating: str | None = None,
    ) -> Message:
        conversation = self.conversations.get(user.pk) or Conversation.objects.create(user=user)
        self.conversations[user.pk] = conversation
        asked = Message.objects.create(conversation=conversation, role="user", content=question)
        answer = Message.objects.create(
            conversation=conversation,
            role="assistant",
            content="" if abstain else "An answer.",
            abstain=abstain,
            error=error,
            citations=cites or [],
            timings={"retrieve": 10.0, "total": total},
            searched=[{"id": c.pk, "name": c.name, "version": 1} for c in collections],
        )
        Message.objects.filter(pk__in=[asked.pk, answer.pk]).update(created_at=_at(days_ago))
        if rating:
            feedback = Feedback.objects.create(message=answer, user=user, rating=rating, question=question)
            feedback.collections.set(collections)
        self.answers[number] = answer
        return answer


@pytest.fixture
def world(alice, bob, charlie, team) -> World:
    return World(alice, bob, charlie, team)


def _last(days: int) -> tuple[dt.date, dt.date]:
    period = analytics.Period.last(days)
    return period.since, period.until


A_SUMMARY = {
    "questions": 8,  # 1, 2, 3, 4, 5, 6, 9, 10: not 7 (40 days ago), 8 (X only), 11 (B only)
    "answers": 7,
    "failed": 1,
    "abstained": 2,
    "abstention_rate": 2 / 7,
    "rated": 4,  # 1 up; 2, 3 and 5 (failed, but rated) down
    "thumbs_down": 3,
    "thumbs_down_rate": 0.75,
    "timed": 6,  # 10's total is not a number, 5 failed
    "median_ms": 3500.0,
    "p95_ms": 5750.0,
}
B_SUMMARY = {
    "questions": 2,  # 2 and 11
    "answers": 2,
    "failed": 0,
    "abstained": 0,
    "abstention_rate": 0.0,
    "rated": 1,
    "thumbs_down": 1,
    "thumbs_down_rate": 1.0,
    "timed": 2,
    "median_ms": 4500.0,
    "p95_ms": 6750.0,
}
TEAM_SUMMARY = {
    "questions": 9,  # A's and 11; 2 (A and B) once; never 8 (X only)
    "answers": 8,
    "failed": 1,
    "abstained": 2,
    "abstention_rate": 2 / 8,
    "rated": 4,
    "thumbs_down": 3,
    "thumbs_down_rate": 0.75,
    "timed": 7,
    "median_ms": 4000.0,
    "p95_ms": 6700.0,
}


def _check(numbers: dict[str, Any], expected: dict[str, Any]) -> None:
    assert {key: numbers[key] for key in expected} == pytest.approx(expected)


def test_a_collections_report_counts_its_answers_by_hand(world):
    report = analytics.collection_report([world.a.pk], *_last(30))
    _check(report.summary.as_dict(), A_SUMMARY)
    times = [1000, 2000, 3000, 4000, 5000, 6000]
    assert report.summary.median_ms == pytest.approx(percentile(times, 0.5))
    assert report.summary.p95_ms == pytest.approx(percentile(times, 0.95))
    assert report.collections == []  # one collection: no rows per collection

    assert len(report.days) == 30
    assert report.days[-1].day == timezone.localdate()
    by_day = {(timezone.localdate() - day.day).days: day for day in report.days}
    recent = [by_day[days_ago] for days_ago in range(6)]
    assert [(d.questions, d.answers, d.failed, d.abstained, d.thumbs_down) for d in recent] == [
        (1, 1, 0, 0, 0),  # 1 (rated up)
        (2, 1, 1, 0, 2),  # 2 and 5 (failed), both rated down
        (1, 1, 0, 1, 0),  # 4
        (1, 1, 0, 1, 1),  # 3
        (0, 0, 0, 0, 0),
        (1, 1, 0, 0, 0),  # 6
    ]
    assert sum(day.questions for day in report.days) == 8

    # a1: 1 (twice, counted once), 2 and 10, not 5 (failed); a2: 9; never b1 (B), x, nor the deleted one
    assert [(c.name, c.collection, c.answers) for c in report.cited] == [
        ("vacation.pdf", "Team handbook", 3),
        ("travel.pdf", "Team handbook", 1),
    ]
    # 3 and 4 are one question (case and spaces aside), asked last as 4; 6 cites nothing; 5 failed
    assert [(q.question, q.times, q.abstained, q.last_asked) for q in report.unanswered] == [
        ("what is  the Parking policy? ", 2, 2, _at(2)),
        ("Where is the handbook?", 1, 0, _at(5)),
    ]


def test_a_teams_report_aggregates_its_collections_only(world):
    report = analytics.collection_report([world.a.pk, world.b.pk], *_last(30))
    _check(report.summary.as_dict(), TEAM_SUMMARY)
    assert report.summary.p95_ms == pytest.approx(percentile([1000, 2000, 3000, 4000, 5000, 6000, 7000], 0.95))
    rows = {row.name: row.numbers.as_dict() for row in report.collections}
    assert list(rows) == ["Team handbook", "Policies"]  # by id
    _check(rows["Team handbook"], A_SUMMARY)
    _check(rows["Policies"], B_SUMMARY)
    assert [(c.name, c.collection, c.answers) for c in report.cited] == [
        ("vacation.pdf", "Team handbook", 3),
        ("rules.pdf", "Policies", 2),
        ("travel.pdf", "Team handbook", 1),
    ]
    assert "charlie" not in repr(report)  # neither charlie's question, nor his document


def test_another_teams_answers_never_count(world):
    report = analytics.collection_report([world.x.pk], *_last(30))
    assert report.summary.questions == 2  # 8 and 9, which searched A too
    assert [(c.name, c.answers) for c in report.cited] == [("charlie-secret.pdf", 2)]
    assert [q.question for q in report.unanswered] == ["charlie's secret question"]
    assert analytics.collection_report([], *_last(30)).summary.questions == 0


def test_the_period_filter(world):
    assert analytics.collection_report([world.a.pk], *_last(7)).summary.questions == 6  # not 9 nor 10
    report = analytics.collection_report([world.a.pk], *_last(90))
    assert report.summary.questions == 9
    assert len(report.days) == 90
    assert report.summary.timed == 7
    assert report.summary.p95_ms == pytest.approx(percentile([1000, 2000, 3000, 4000, 5000, 6000, 99999], 0.95))
    today = timezone.localdate()
    only = analytics.collection_report([world.a.pk], today - dt.timedelta(days=3), today - dt.timedelta(days=2))
    assert (only.summary.questions, only.summary.abstained, [d.questions for d in only.days]) == (2, 2, [1, 1])


def test_days_are_the_portal_time_zones(world, settings):
    settings.TIME_ZONE = "Pacific/Auckland"
    # 23:30 UTC is the next day in Auckland (UTC+12 or +13)
    utc_late = dt.datetime.combine(timezone.localdate() - dt.timedelta(days=2), dt.time(23, 30), tzinfo=dt.UTC)
    Message.objects.filter(pk=world.answers[1].pk).update(created_at=utc_late)
    assert timezone.localtime(utc_late).date() == utc_late.date() + dt.timedelta(days=1)
    report = analytics.collection_report([world.a.pk], *_last(30))
    in_a = Message.objects.filter(pk__in=[world.answers[n].pk for n in (1, 2, 3, 4, 5, 6, 9, 10)])
    expected: dict[dt.date, int] = {}
    for created_at in in_a.values_list("created_at", flat=True):
        day = timezone.localtime(created_at).date()
        expected[day] = expected.get(day, 0) + 1
    assert {day.day: day.questions for day in report.days if day.questions} == expected


def _sections(text: str) -> dict[str, list[list[str]]]:
    sections: dict[str, list[list[str]]] = {}
    rows = list(csv.reader(io.StringIO(text)))
    current: list[list[str]] = []
    for row in rows:
        if not row:
            current = []
        elif not current and len(row) == 1 and row[0] not in sections:
            sections[row[0]] = current = [row]
        else:
            current.append(row)
    return {name: body[1:] for name, body in sections.items()}


@pytest.mark.parametrize(
    ("ms", "shown", "shown_zh"),
    [
        (None, "—", "—"),
        (850.4, "850 ms", "850 毫秒"),
        (3500.0, "3.5 s", "3.5 秒"),
        (89457.0, "89.5 s", "89.5 秒"),
        (169686.0, "2.8 min", "2.8 分钟"),
    ],
)
def test_a_time_reads_in_milliseconds_seconds_or_minutes(ms, shown, shown_zh):
    from django.utils import translation

    from portal.templatetags.portal_format import duration_ms

    with translation.override("en"):
        assert duration_ms(ms) == shown
    with translation.override("zh-hans"):
        assert duration_ms(ms) == shown_zh


def test_the_collection_page_shows_the_numbers_and_its_csv_matches(client, alice, world):
    client.force_login(alice)
    url = reverse("collection-analytics", args=[world.a.pk])
    page = client.get(url)
    assert page.status_code == 200
    body = page.content.decode()
    assert 'data-metric="questions">8<' in body
    assert 'data-metric="abstention_rate">29 %<' in body  # 2 / 7
    assert 'data-metric="thumbs_down_rate">75 %<' in body
    assert 'data-metric="median_ms">3.5 s<' in body
    assert 'data-metric="p95_ms">5.8 s<' in body
    # The 30 days hold questions on a few of them; each run of quiet days is one row.
    days = re.findall(r'<tr data-day="([\d-]+)"', body)
    quiet = re.findall(r'<tr class="quiet" data-days="([\d-]+)/([\d-]+)"', body)
    assert days
    assert quiet
    assert len(days) + sum((dt.date.fromisoformat(b) - dt.date.fromisoformat(a)).days + 1 for a, b in quiet) == 30
    assert "vacation.pdf" in body
    assert "Where is the handbook?" in body
    assert "charlie" not in body
    assert "export=csv" in body  # the download link

    response = client.get(url, {"export": "csv"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert f'filename="analytics-collection-{world.a.pk}-' in response["Content-Disposition"]
    sections = _sections(response.content.decode())
    summary = dict(sections["summary"][1:])
    assert summary["report"] == "Team handbook"
    assert {key: summary[key] for key in A_SUMMARY} == {
        "questions": "8", "answers": "7", "failed": "1", "abstained": "2", "abstention_rate": "0.2857",
        "rated": "4", "thumbs_down": "3", "thumbs_down_rate": "0.7500", "timed": "6",
        "median_ms": "3500.0", "p95_ms": "5750.0",
    }  # fmt: skip
    days = sections["days"]
    assert days[0] == ["day", "questions", "answers", "failed", "abstained", "thumbs_down"]
    assert len(days) == 31
    assert days[-2] == [(timezone.localdate() - dt.timedelta(days=1)).isoformat(), "2", "1", "1", "0", "2"]
    assert sections["most cited documents"][1:] == [
        [str(world.a1.pk), "vacation.pdf", str(world.a.pk), "Team handbook", "3"],
        [str(world.a2.pk), "travel.pdf", str(world.a.pk), "Team handbook", "1"],
    ]
    assert [row[:3] for row in sections["questions with no good passage"][1:]] == [
        ["what is  the Parking policy? ", "2", "2"],
        ["Where is the handbook?", "1", "0"],
    ]
    assert "collections" not in sections


def test_the_team_page_and_its_csv(client, alice, world):
    client.force_login(alice)
    url = reverse("team-analytics", args=[world.team.pk])
    page = client.get(url, {"days": 30})
    assert page.status_code == 200
    body = page.content.decode()
    assert 'data-metric="questions">9<' in body
    assert "Policies" in body
    assert "charlie" not in body
    sections = _sections(client.get(url, {"export": "csv"}).content.decode())
    assert dict(sections["summary"][1:])["questions"] == "9"
    header, *rows = sections["collections"]
    assert header[:3] == ["collection_id", "collection", "questions"]
    assert sorted((row[1], row[2], row[header.index("p95_ms")]) for row in rows) == [
        ("Policies", "2", "6750.0"),
        ("Team handbook", "8", "5750.0"),
    ]


def test_a_formula_in_a_question_is_not_run_by_a_spreadsheet(client, alice, world):
    world.ask(12, alice, '=HYPERLINK("http://evil")', [world.a], 0, total=10, abstain=True)
    client.force_login(alice)
    text = client.get(reverse("collection-analytics", args=[world.a.pk]), {"export": "csv"}).content.decode()
    assert "'=HYPERLINK" in text


def test_the_api_gives_the_same_numbers(api, alice, world):
    token_for(api, alice)
    response = api.get(reverse("collection-analytics-api", args=[world.a.pk]))
    assert response.status_code == 200
    data = response.json()
    _check(data, A_SUMMARY)
    assert data["since"] == _last(30)[0].isoformat()
    assert data["until"] == timezone.localdate().isoformat()
    assert len(data["days"]) == 30
    assert data["collections"] == []
    assert [(c["document_id"], c["answers"]) for c in data["most_cited"]] == [(world.a1.pk, 3), (world.a2.pk, 1)]
    assert data["no_good_passage"][0]["times"] == 2

    team = api.get(reverse("team-analytics-api", args=[world.team.pk]), {"days": 7}).json()
    assert team["questions"] == 7  # A's six of the last 7 days and 11
    assert {row["name"]: row["questions"] for row in team["collections"]} == {"Team handbook": 6, "Policies": 2}

    exported = api.get(reverse("team-analytics-api", args=[world.team.pk]), {"export": "csv", "days": 90})
    assert exported.status_code == 200
    assert exported["Content-Type"].startswith("text/csv")
    assert dict(_sections(exported.content.decode())["summary"][1:])["questions"] == "10"  # 7 too


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"days": "5"}, "days"),
        ({"days": "many"}, "days"),
        ({"since": "2026-02-30"}, "since"),
        ({"since": "2026-03-10", "until": "2026-03-01"}, "__all__"),
        ({"since": "2020-01-01", "until": "2026-01-01"}, "__all__"),
        ({"export": "xlsx"}, "export"),
    ],
)
def test_bad_periods_are_a_400_that_says_why(api, client, alice, world, query, field):
    token_for(api, alice)
    response = api.get(reverse("collection-analytics-api", args=[world.a.pk]), query)
    assert response.status_code == 400
    body = response.json()
    assert field in body, body
    client.force_login(alice)
    page = client.get(reverse("collection-analytics", args=[world.a.pk]), query)
    assert page.status_code == 400
    assert 'role="alert"' in page.content.decode()


def test_since_alone_runs_to_today_and_dates_win_over_days(api, alice, world):
    token_for(api, alice)
    since = timezone.localdate() - dt.timedelta(days=3)
    data = api.get(reverse("collection-analytics-api", args=[world.a.pk]), {"since": since, "days": 90}).json()
    assert (data["since"], data["until"]) == (since.isoformat(), timezone.localdate().isoformat())
    assert data["questions"] == 5  # 1, 2, 3, 4, 5


def test_only_admins_see_analytics(client, api, alice, bob, charlie, world):
    """bob, a viewer and then an editor of the team, gets 403; charlie (no access) 404, both
    for pages and API; a team admin sees it."""
    for role in (Role.VIEWER, Role.EDITOR):
        set_role(world.team, bob, role)
        client.force_login(bob)
        token_for(api, bob)
        assert client.get(reverse("collection-analytics", args=[world.a.pk])).status_code == 403
        assert client.get(reverse("team-analytics", args=[world.team.pk])).status_code == 403
        assert api.get(reverse("collection-analytics-api", args=[world.a.pk])).status_code == 403
        assert api.get(reverse("team-analytics-api", args=[world.team.pk])).status_code == 403
    for url in (
        reverse("collection-analytics", args=[world.a.pk]),
        reverse("team-analytics", args=[world.team.pk]),
        reverse("collection-analytics", args=[world.a.pk]) + "?export=csv",
    ):
        client.force_login(charlie)
        assert client.get(url).status_code == 404
    token_for(api, charlie)
    assert api.get(reverse("collection-analytics-api", args=[world.a.pk])).status_code == 404
    assert api.get(reverse("team-analytics-api", args=[world.team.pk])).status_code == 404
    set_role(world.team, bob, Role.ADMIN)
    client.force_login(bob)
    assert client.get(reverse("team-analytics", args=[world.team.pk])).status_code == 200


def test_an_empty_collection_has_no_rates(db):
    collection = make_collection(make_user("dora"), "Empty")
    report = analytics.collection_report([collection.pk], *_last(7))
    assert report.summary.as_dict() == {**analytics.Numbers().as_dict()}
    assert report.summary.abstention_rate is None
    assert report.summary.median_ms is None
    assert [day.questions for day in report.days] == [0] * 7
    assert report.cited == []
    assert report.unanswered == []


def test_the_team_page_links_its_analytics_for_admins_only(client, alice, bob, team):
    analytics_url = reverse("team-analytics", args=[team.pk])
    client.force_login(alice)
    assert analytics_url in client.get(reverse("team", args=[team.pk])).content.decode()
    client.force_login(bob)  # a viewer
    assert analytics_url not in client.get(reverse("team", args=[team.pk])).content.decode()

"""Golden questions per collection: by hand on the page and over the API, imported and
exported as the public evaluation's JSON Lines, made from feedback, marked stale when their
file goes; only the owner or a team admin changes them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from assistant.models import Conversation, Message
from assistant.retrieval.evaluation import parse_question
from ingestion.actions import do_add_document
from knowledge.actions import do_delete_document
from knowledge.models import Document, Role
from quality import evaluation
from quality.actions import do_add_golden, do_golden_from_feedback, do_import_golden, do_update_golden
from quality.golden import export_jsonl
from quality.models import Feedback, GoldenQuestion
from tests.conftest import set_role, token_for

pytestmark = pytest.mark.usefixtures("media")


def _document(collection, name: str, pages: int = 3) -> Document:
    document, _run = do_add_document(collection, name, f"# {name}\n\nSome text.".encode(), enqueue=False)
    Document.objects.filter(pk=document.pk).update(page_count=pages)
    return document


@pytest.fixture
def guide(private_collection) -> Document:
    return _document(private_collection, "guide.md")


def _feedback(user, collection, **fields) -> Feedback:
    conversation = Conversation.objects.create(user=user, title="q")
    answer = Message.objects.create(conversation=conversation, role="assistant", content="It is 1.5.")
    defaults = {"rating": "down", "question": "How far do the whiskers reach?", "answer": "It is 1.5."}
    feedback = Feedback.objects.create(message=answer, user=user, **{**defaults, **fields})
    feedback.collections.add(collection)
    return feedback


def _messages(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


# By hand, on the page


def test_a_manager_adds_edits_and_deletes_a_question_on_the_page(client, alice, private_collection, guide):
    client.force_login(alice)
    page = reverse("collection-golden", args=[private_collection.pk])
    form = {
        "question": "How far do the whiskers reach?",
        "lang": "",
        "kind": "fact",
        "file": "guide.md",
        "page": "2",
        "keys": "1.5\ncircle | point type 7",
        "key": "",
    }
    assert client.post(page, form).status_code == 302
    added = GoldenQuestion.objects.get(collection=private_collection)
    assert (added.key, added.lang, added.kind, added.created_by) == ("q-1", "en", "fact", alice)
    assert added.gold == [{"file": "guide.md", "page": 2}]
    assert added.keys == ["1.5", ["circle", "point type 7"]]
    listed = client.get(page)
    assert listed.status_code == 200
    assert "How far do the whiskers reach?" in listed.content.decode()

    edit = reverse("golden-edit", args=[private_collection.pk, added.pk])
    shown = client.get(edit)
    assert shown.status_code == 200
    assert "circle | point type 7" in shown.content.decode()
    assert client.post(edit, {**form, "page": "", "key": "whiskers", "keys": "1.5"}).status_code == 302
    added.refresh_from_db()
    assert (added.key, added.gold, added.keys) == ("whiskers", [{"file": "guide.md"}], ["1.5"])

    assert client.post(reverse("golden-delete", args=[private_collection.pk, added.pk])).status_code == 302
    assert not GoldenQuestion.objects.filter(pk=added.pk).exists()


def test_the_page_refuses_a_page_past_the_end_and_keeps_what_was_typed(client, alice, private_collection, guide):
    client.force_login(alice)
    form = {"question": "Where is the box plot?", "lang": "en", "kind": "fact", "file": "guide.md", "page": "9"}
    response = client.post(reverse("collection-golden", args=[private_collection.pk]), form)
    assert response.status_code == 400
    body = response.content.decode()
    assert "“guide.md” has 3 pages; there is no page 9." in body
    assert "Where is the box plot?" in body
    assert not GoldenQuestion.objects.exists()


def test_should_abstain_makes_an_unanswerable_question_without_pages(client, alice, private_collection, guide):
    client.force_login(alice)
    form = {"question": "Who won the 1998 world cup?", "lang": "en", "kind": "fact", "file": "guide.md",
            "keys": "France", "abstain": "on"}  # fmt: skip
    assert client.post(reverse("collection-golden", args=[private_collection.pk]), form).status_code == 302
    added = GoldenQuestion.objects.get()
    assert (added.kind, added.gold, added.keys, added.should_abstain) == ("unanswerable", [], [], True)


def test_the_rules_give_readable_errors(alice, private_collection, guide):
    def refused(**fields) -> str:
        with pytest.raises(ValidationError) as caught:
            do_add_golden(private_collection, alice, **fields)
        return " ".join(caught.value.messages)

    base: dict[str, Any] = {
        "question": "What is it?",
        "lang": "en",
        "kind": "fact",
        "gold": [{"file": "guide.md", "page": 1}],
    }
    assert refused(**{**base, "question": "  "}) == "Write the question."
    assert "at most 2000" in refused(**{**base, "question": "x" * 2001})
    assert refused(**{**base, "lang": "fr"}) == "The language must be one of zh, en, not “fr”."
    assert "The kind must be one of" in refused(**{**base, "kind": "riddle"})
    assert refused(**{**base, "gold": [{"file": "gone.pdf", "page": 1}]}) == (
        "The collection has no document named “gone.pdf”."
    )
    assert refused(**{**base, "gold": []}) == "Choose the file that answers the question."
    assert "has no expected page" in refused(**{**base, "kind": "unanswerable"})
    do_add_golden(private_collection, alice, **base, key="dup")
    assert refused(**base, key="dup") == "The collection already has a golden question with the id “dup”."
    chinese = do_add_golden(private_collection, alice, **{**base, "lang": "", "question": "箱线图的须延伸多远？"})
    assert (chinese.lang, chinese.key) == ("zh", "q-2")


# Over the API


def test_a_manager_keeps_questions_over_the_api(api, alice, private_collection, guide):
    token_for(api, alice)
    listing = reverse("collection-golden-list", args=[private_collection.pk])
    created = api.post(
        listing,
        {"question": "How far do the whiskers reach?", "gold": [{"file": "guide.md", "page": 2}], "keys": ["1.5"]},
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert {k: body[k] for k in ("key", "lang", "kind", "gold", "keys", "stale")} == {
        "key": "q-1",
        "lang": "en",
        "kind": "fact",
        "gold": [{"file": "guide.md", "page": 2}],
        "keys": ["1.5"],
        "stale": False,
    }
    detail = reverse("collection-golden-detail", args=[private_collection.pk, body["id"]])
    assert api.get(listing).json()["results"][0]["id"] == body["id"]
    assert api.get(detail).json()["question"] == "How far do the whiskers reach?"

    patched = api.patch(detail, {"keys": [["1.5", "one and a half"]]}, format="json")
    assert patched.status_code == 200, patched.content
    assert patched.json()["keys"] == [["1.5", "one and a half"]]
    assert patched.json()["gold"] == [{"file": "guide.md", "page": 2}]

    put = api.put(detail, {"question": "Is there a box plot?", "kind": "unanswerable"}, format="json")
    assert put.status_code == 200, put.content
    assert {k: put.json()[k] for k in ("key", "kind", "gold", "keys")} == {
        "key": "q-1",
        "kind": "unanswerable",
        "gold": [],
        "keys": [],
    }

    refused = api.post(listing, {"question": "Where?", "gold": [{"file": "gone.pdf"}]}, format="json")
    assert refused.status_code == 400
    assert refused.json() == {"detail": ["The collection has no document named “gone.pdf”."]}

    assert api.delete(detail).status_code == 204
    assert not GoldenQuestion.objects.exists()


# JSON Lines


def _line(**fields) -> str:
    entry = {"id": "a", "question": "What?", "lang": "en", "type": "fact", "gold": [{"file": "guide.md", "page": 1}]}
    return json.dumps({**entry, **fields}, ensure_ascii=False)


def test_an_import_reports_each_bad_line_and_imports_the_rest(alice, private_collection, guide):
    do_add_golden(private_collection, alice, key="known", question="Old?", lang="en", gold=[{"file": "guide.md"}])
    text = "\n".join(
        [
            _line(id="good-1", keys=["1.5", ["circle", "7"]]),
            '{"id": "broken", "question": ',
            _line(id="french", lang="fr"),
            _line(id="missing", gold=[{"file": "gone.pdf", "page": 1}]),
            _line(id="good-1", question="Again?"),
            "",
            _line(id="good-2", gold=[{"file": "guide.md"}], history=[{"role": "user", "content": "Hi"}]),
            _line(id="known", question="New?", gold=[{"file": "guide.md", "page": 0}]),
            _line(id="late", gold=[{"file": "guide.md", "page": 4}]),
            "[1, 2]",
        ]
    )
    result = do_import_golden(private_collection, alice, text)
    assert (result.imported, result.updated) == (2, 1)
    errors = dict(result.errors)
    assert sorted(errors) == [2, 3, 4, 5, 9, 10]
    assert errors[2].startswith("Not valid JSON (")
    assert errors[3] == "The language must be one of zh, en, not “fr”."
    assert errors[4] == "The collection has no document named “gone.pdf”."
    assert errors[5] == "The id “good-1” is used twice in the file (first on line 1)."
    assert errors[9] == "“guide.md” has 3 pages; there is no page 4."
    assert errors[10] == "Each line must be a JSON object."
    stored = {golden.key: golden for golden in GoldenQuestion.objects.filter(collection=private_collection)}
    assert sorted(stored) == ["good-1", "good-2", "known"]
    assert stored["good-1"].keys == ["1.5", ["circle", "7"]]
    assert stored["good-2"].gold == [{"file": "guide.md"}]
    assert stored["good-2"].history == [{"role": "user", "content": "Hi"}]
    assert (stored["known"].question, stored["known"].gold) == ("New?", [{"file": "guide.md"}])


def test_an_export_imports_back_as_the_same_questions(alice, private_collection, team_collection, guide):
    _document(team_collection, "guide.md")
    do_add_golden(private_collection, alice, key="p", question="箱线图的须延伸多远？",
               gold=[{"file": "guide.md", "page": 2}], keys=["1.5", ["圆", "circle"]])  # fmt: skip
    do_add_golden(private_collection, alice, key="any", question="Any page?", lang="en", gold=[{"file": "guide.md"}])
    do_add_golden(private_collection, alice, key="none", question="Who won?", lang="en", kind="unanswerable")
    do_add_golden(private_collection, alice, key="follow", question="And then?", lang="en", kind="followup",
               gold=[{"file": "guide.md", "page": 3}], history=[{"role": "user", "content": "First?"},
                                                                {"role": "assistant", "content": "Yes."}])  # fmt: skip
    exported = export_jsonl(private_collection)
    assert "箱线图" in exported  # ensure_ascii=False
    lines = exported.splitlines()
    assert len(lines) == 4
    paged = [line for line in lines if '"any"' not in line]
    assert {parse_question(line, "export").id for line in paged} == {"p", "none", "follow"}  # the public format

    result = do_import_golden(team_collection, alice, exported)
    assert (result.imported, result.updated, result.errors) == (4, 0, [])
    assert export_jsonl(team_collection) == exported
    again = do_import_golden(team_collection, alice, exported)
    assert (again.imported, again.updated, again.errors) == (0, 4, [])


def test_the_page_imports_a_file_and_reports_bad_lines(client, alice, private_collection, guide):
    client.force_login(alice)
    upload = SimpleUploadedFile("golden.jsonl", (_line(id="x") + "\n" + _line(id="y", lang="de")).encode())
    response = client.post(reverse("collection-golden-import", args=[private_collection.pk]), {"file": upload},
                           follow=True)  # fmt: skip
    assert response.status_code == 200
    shown = _messages(response)
    assert "1 questions added, 0 updated." in shown
    assert "Line 2: The language must be one of zh, en, not “de”." in shown
    assert list(GoldenQuestion.objects.values_list("key", flat=True)) == ["x"]

    exported = client.get(reverse("collection-golden-export", args=[private_collection.pk]))
    assert exported.status_code == 200
    assert exported["Content-Type"].startswith("application/x-ndjson")
    assert exported["Content-Disposition"].endswith('-golden.jsonl"')
    assert json.loads(exported.content.decode())["id"] == "x"


def test_the_api_imports_a_body_or_a_file_and_exports(api, alice, private_collection, guide):
    token_for(api, alice)
    url = reverse("collection-golden-import-api", args=[private_collection.pk])
    body = (_line(id="x") + "\nnot json\n").encode()
    response = api.post(url, body, content_type="application/x-ndjson")
    assert response.status_code == 200, response.content
    assert response.json()["imported"] == 1
    assert [error["line"] for error in response.json()["errors"]] == [2]
    upload = SimpleUploadedFile("golden.jsonl", _line(id="x", question="Changed?").encode())
    response = api.post(url, {"file": upload}, format="multipart")
    assert response.json() == {"imported": 0, "updated": 1, "errors": []}
    assert api.post(url, {}, format="multipart").status_code == 400

    exported = api.get(reverse("collection-golden-export-api", args=[private_collection.pk]))
    assert exported.status_code == 200
    assert exported["Content-Type"].startswith("application/x-ndjson")
    assert json.loads(exported.content)["question"] == "Changed?"


# Stale questions


def test_a_question_whose_file_was_deleted_is_stale(client, api, alice, private_collection, guide):
    kept = _document(private_collection, "kept.md")
    stale = do_add_golden(private_collection, alice, key="s", question="Gone?", lang="en", gold=[{"file": "guide.md"}])
    do_add_golden(private_collection, alice, key="k", question="Here?", lang="en", gold=[{"file": kept.name}])
    do_add_golden(private_collection, alice, key="u", question="Nobody knows?", lang="en", kind="unanswerable")
    do_delete_document(guide)

    assert evaluation.questions_of(private_collection).stale == ["s"]
    client.force_login(alice)
    page = client.get(reverse("collection-golden", args=[private_collection.pk])).content.decode()
    row = page.split(f'id="golden-{stale.pk}"', 1)[1].split("</tr>", 1)[0]
    assert 'data-stale="true"' in page.split(f'id="golden-{stale.pk}"', 1)[1][:40]
    assert ">stale<" in row
    assert page.count(">stale<") == 1
    token_for(api, alice)
    listed = api.get(reverse("collection-golden-list", args=[private_collection.pk])).json()["results"]
    assert {item["key"]: item["stale"] for item in listed} == {"k": False, "s": True, "u": False}
    # Editing it to a file the collection has makes it count again.
    do_update_golden(stale, gold=[{"file": "kept.md", "page": 1}])
    assert evaluation.questions_of(private_collection).stale == []


# From feedback


def test_feedback_with_a_correction_becomes_a_question_expecting_the_corrected_page(
    client, alice, private_collection, guide
):
    feedback = _feedback(alice, private_collection, correct_document=guide, correct_page=3, correct_answer="1.5")
    client.force_login(alice)
    response = client.post(reverse("feedback-to-golden", args=[feedback.pk]), {"collection": private_collection.pk})
    assert response.status_code == 302
    made = GoldenQuestion.objects.get()
    assert response["Location"] == reverse("collection-golden", args=[private_collection.pk]) + f"#golden-{made.pk}"
    assert (made.key, made.question, made.lang, made.kind) == (
        f"feedback-{feedback.pk}",
        "How far do the whiskers reach?",
        "en",
        "fact",
    )
    assert (made.gold, made.keys, made.feedback, made.created_by) == (
        [{"file": "guide.md", "page": 3}],
        ["1.5"],
        feedback,
        alice,
    )
    again = client.post(reverse("feedback-to-golden", args=[feedback.pk]), {"collection": private_collection.pk},
                        follow=True)  # fmt: skip
    assert f"This feedback is already the golden question “feedback-{feedback.pk}”." in _messages(again)
    assert GoldenQuestion.objects.count() == 1


def test_feedback_becomes_a_question_only_with_a_page_to_expect(alice, private_collection, team_collection, guide):
    long_answer = "x" * 41
    helpful = _feedback(
        alice,
        private_collection,
        rating="up",
        question="箱线图的须延伸多远？",
        correct_answer=long_answer,
        citations=[{"file": "elsewhere.md", "page": 1}, {"file": "guide.md", "page": 2}],
    )
    made = do_golden_from_feedback(helpful, private_collection, alice)
    assert (made.gold, made.keys, made.lang) == ([{"file": "guide.md", "page": 2}], [], "zh")

    unhelpful = _feedback(alice, private_collection)
    with pytest.raises(ValidationError, match="add the right page to the feedback first"):
        do_golden_from_feedback(unhelpful, private_collection, alice)
    with pytest.raises(ValidationError, match=r"This answer did not search “Team handbook”\."):
        do_golden_from_feedback(unhelpful, team_collection, alice)
    elsewhere = _feedback(alice, team_collection, correct_document=guide, correct_page=1)
    with pytest.raises(ValidationError, match="not in this collection"):
        do_golden_from_feedback(elsewhere, team_collection, alice)


def test_the_api_turns_feedback_into_a_question(api, alice, private_collection, guide):
    feedback = _feedback(alice, private_collection, correct_document=guide, correct_page=1)
    token_for(api, alice)
    url = reverse("feedback-golden", args=[feedback.pk])
    response = api.post(url, {}, format="json")  # the only collection the answer searched
    assert response.status_code == 201, response.content
    assert response.json()["gold"] == [{"file": "guide.md", "page": 1}]
    assert api.post(url, {"collection": private_collection.pk}, format="json").status_code == 400


# Access


@pytest.mark.parametrize("role", [Role.VIEWER, Role.EDITOR])
def test_members_who_do_not_manage_read_but_cannot_change(client, api, alice, bob, team, team_collection, role):
    set_role(team, bob, role)
    _document(team_collection, "handbook.md")
    question = do_add_golden(team_collection, alice, question="What?", lang="en", gold=[{"file": "handbook.md"}])
    client.force_login(bob)
    page = client.get(reverse("collection-golden", args=[team_collection.pk]))
    assert page.status_code == 200
    assert "What?" in page.content.decode()
    assert reverse("golden-edit", args=[team_collection.pk, question.pk]) not in page.content.decode()
    form = {"question": "Mine?", "lang": "en", "kind": "fact", "file": "handbook.md"}
    assert client.post(reverse("collection-golden", args=[team_collection.pk]), form).status_code == 403
    assert client.post(reverse("golden-delete", args=[team_collection.pk, question.pk])).status_code == 403
    assert client.get(reverse("collection-golden-export", args=[team_collection.pk])).status_code == 403
    token_for(api, bob)
    listing = reverse("collection-golden-list", args=[team_collection.pk])
    assert api.get(listing).status_code == 200
    payload = {"question": "Mine?", "gold": [{"file": "handbook.md"}]}
    assert api.post(listing, payload, format="json").status_code == 403
    detail = reverse("collection-golden-detail", args=[team_collection.pk, question.pk])
    assert api.patch(detail, {"question": "Changed?"}, format="json").status_code == 403
    assert api.delete(detail).status_code == 403
    assert GoldenQuestion.objects.filter(collection=team_collection).count() == 1
    # The team admin does.
    set_role(team, bob, Role.ADMIN)
    assert api.post(listing, payload, format="json").status_code == 201


def test_strangers_get_404(client, api, alice, charlie, private_collection, guide):
    question = do_add_golden(private_collection, alice, question="What?", lang="en", gold=[{"file": "guide.md"}])
    feedback = _feedback(alice, private_collection, correct_document=guide, correct_page=1)
    client.force_login(charlie)
    for url in (
        reverse("collection-golden", args=[private_collection.pk]),
        reverse("golden-edit", args=[private_collection.pk, question.pk]),
        reverse("collection-golden-export", args=[private_collection.pk]),
    ):
        assert client.get(url).status_code == 404, url
    to_golden = reverse("feedback-to-golden", args=[feedback.pk])
    assert client.post(to_golden, {"collection": private_collection.pk}).status_code == 404
    token_for(api, charlie)
    assert api.get(reverse("collection-golden-list", args=[private_collection.pk])).status_code == 404
    detail = reverse("collection-golden-detail", args=[private_collection.pk, question.pk])
    assert api.delete(detail).status_code == 404
    feedback_url = reverse("feedback-golden", args=[feedback.pk])
    assert api.post(feedback_url, {"collection": private_collection.pk}, format="json").status_code == 404
    assert GoldenQuestion.objects.count() == 1

"""The answer metrics of `manage.py evaluate --answers`, by hand."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from assistant.answering.evaluation import (
    answer_scores,
    answer_summary,
    key_coverage,
    percentile,
    quote_cuts,
    quoted_spans,
)
from assistant.answering.values import normalise
from assistant.management.commands.evaluate import format_answers, format_halves
from assistant.retrieval.evaluation import (
    HALVES,
    Question,
    QuestionFileError,
    load_questions,
    parse_question,
    question_half,
    split_halves,
)

PUBLIC = Path(__file__).resolve().parents[2] / "eval"


def question(kind: str = "fact", gold=(("a.pdf", 3),), keys=(("31",),), lang: str = "en", half: str = "") -> Question:
    return Question(id=kind, question="?", lang=lang, type=kind, gold=frozenset(gold), keys=tuple(keys), half=half)


def answer(text: str = "", cites=(), attachments=(), abstain: bool = False, evidence=()) -> dict:
    return {
        "answer": text,
        "abstain": abstain,
        "citations": [{"file": f, "page": p} for f, p in cites],
        "attachments": [{"file": f, "page": p} for f, p in attachments],
        "evidence": [{"quote": quote, "citation": {"text": passage}} for quote, passage in evidence],
    }


def test_values_compare_across_widths_cases_and_thousands_separators():
    assert normalise("ＧＢ　２３１２，共 6,763 个") == "gb 2312,共 6763 个"
    assert normalise("1 234 567 and 12,34") == "1234567 and 12,34"  # 12,34 is no thousands group
    assert key_coverage("The default is ３１ [1].", [("31",)]) == 1.0
    assert key_coverage("It is --output", [("-o", "--output"), ("png",)]) == 0.5
    assert key_coverage("anything", []) == 1.0


def test_an_answer_citing_the_gold_page_second_scores_its_rank():
    scores = answer_scores(question(), answer("Border 31 [2].", cites=[("b.pdf", 1), ("a.pdf", 3)]))
    assert scores["cite@1"] == 0.0
    assert scores["cite@5"] == 1.0
    assert scores["cite_mrr"] == 0.5
    assert scores["gold_recall"] == 1.0
    assert scores["key_coverage"] == scores["keys_all"] == 1.0
    assert scores["abstain_false"] == 0.0
    assert scores["abstain_correct"] is None
    assert scores["attachment"] is None  # not a picture question


def test_a_multi_hop_answer_with_one_of_two_pages_recalls_half():
    multi = question("multihop", gold=(("a.pdf", 3), ("b.pdf", 9)), keys=(("31",), ("17",)))
    scores = answer_scores(multi, answer("A is 31 [1].", cites=[("a.pdf", 3)]))
    assert scores["gold_recall"] == 0.5
    assert scores["key_coverage"] == 0.5
    assert scores["keys_all"] == 0.0


def test_abstaining_is_right_only_when_nothing_answers():
    unanswerable = Question(id="u", question="?", lang="zh", type="unanswerable", gold=frozenset())
    assert answer_scores(unanswerable, answer(abstain=True))["abstain_correct"] == 1.0
    invented = answer_scores(unanswerable, answer("It is 42 [1].", cites=[("a.pdf", 3)]))
    assert invented["abstain_correct"] == 0.0
    assert invented["cite@5"] is None
    refused = answer_scores(question(), answer("The documents do not contain the answer.", abstain=True))
    assert refused["abstain_false"] == 1.0
    assert refused["cite@5"] == 0.0


def test_a_picture_question_counts_its_attachments():
    picture = question("picture", gold=(("dune.jpg", 1),), keys=())
    scores = answer_scores(picture, answer("Here it is [1].", cites=[("dune.jpg", 1)], attachments=[("dune.jpg", 1)]))
    assert scores["attachment"] == 1.0
    assert scores["key_coverage"] is None  # no keys: not counted as covered
    assert answer_scores(picture, answer("", attachments=[("storm.jpg", 1)]))["attachment"] == 0.0


def test_the_summary_averages_only_where_a_metric_applies():
    questions = [question(), Question(id="u", question="?", lang="zh", type="unanswerable", gold=frozenset())]
    rows = [
        answer_scores(questions[0], answer("31 [1]", cites=[("a.pdf", 3)])),
        answer_scores(questions[1], answer(abstain=True)),
    ]
    summary = answer_summary(questions, rows, [2.0, 4.0])
    assert summary["overall"]["cite@5"] == 1.0  # the unanswerable question does not count here
    assert summary["overall"]["abstain_correct"] == 1.0
    assert summary["overall"]["n"] == 2
    assert summary["overall"]["p50_s"] == 3.0
    assert summary["by_lang"]["zh"]["cite@5"] is None
    assert set(summary["by_type"]) == {"fact", "unanswerable"}
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 95) == pytest.approx(4.8)


def test_the_question_file_holds_keys_history_and_unanswerable_questions():
    parsed = parse_question(
        '{"id": "f", "question": "And its default?", "lang": "en", "type": "followup",'
        ' "gold": [{"file": "a.pdf", "page": 2}], "keys": ["31", ["-o", "--output"]],'
        ' "history": [{"role": "user", "content": "What sets the border?"},'
        ' {"role": "assistant", "content": "set border"}],'
        ' "ci": true}',
        "here",
    )
    assert parsed.keys == (("31",), ("-o", "--output"))
    assert parsed.history == (("user", "What sets the border?"), ("assistant", "set border"))
    assert parsed.ci
    assert parsed.answerable
    none = parse_question('{"id": "u", "question": "?", "lang": "zh", "type": "unanswerable", "gold": []}', "here")
    assert not none.answerable
    assert none.gold == frozenset()
    for bad in (
        '{"id": "u", "question": "?", "lang": "zh", "type": "unanswerable", "gold": [{"file": "a", "page": 1}]}',
        '{"id": "u", "question": "?", "lang": "zh", "type": "unanswerable", "gold": [], "keys": ["1"]}',
        '{"id": "f", "question": "?", "lang": "zh", "type": "fact", "gold": [{"file": "a", "page": 1}], "keys": [[]]}',
        '{"id": "f", "question": "?", "lang": "zh", "type": "fact", "gold": [{"file": "a", "page": 1}],'
        ' "history": [{"role": "system", "content": "x"}]}',
    ):
        with pytest.raises(QuestionFileError):
            parse_question(bad, "here")


# Reading: the keys up front, the length, quotes cut mid-word


def test_every_key_must_be_within_the_first_200_characters():
    two = question(keys=(("31",), ("--output",)))
    early = answer_scores(two, answer("**31**, set with --output [1]. " + "x" * 300))
    assert early["keys_all"] == early["keys_200"] == 1.0
    late = answer_scores(two, answer("31 " + "y" * 250 + " --output [1]."))
    assert late["keys_all"] == 1.0
    assert late["keys_200"] == 0.0  # both are there, one only past the first 200 characters
    assert answer_scores(two, answer("31 only"))["keys_200"] == 0.0
    assert answer_scores(question(keys=()), answer("anything"))["keys_200"] is None


def test_the_length_of_an_answer_is_summed_up_as_the_median_of_those_not_declined():
    questions = [question(), question(), question(), question()]
    rows = [
        answer_scores(questions[0], answer("x" * 100)),
        answer_scores(questions[1], answer("x" * 300)),
        answer_scores(questions[2], answer("y" * 120)),
        answer_scores(questions[3], answer("The documents do not say.", abstain=True)),
    ]
    assert [row["answer_chars"] for row in rows] == [100.0, 300.0, 120.0, None]
    assert answer_summary(questions, rows, [1.0] * 4)["overall"]["median_chars"] == 120.0


PASSAGE = "Whiskers reach 1.5 times the interquartile range. Outliers are drawn as circles."


def test_a_quote_that_starts_inside_a_word_of_its_passage_is_cut():
    assert quote_cuts("kers reach 1.5 times", [PASSAGE], evidence=True) == (True, False)
    assert quote_cuts("Whiskers reach 1.5 times", [PASSAGE], evidence=True) == (False, False)
    assert quote_cuts("reach 1.5 times the interquartile ran", [PASSAGE], evidence=True) == (False, True)
    assert quote_cuts("Outliers are drawn as circles.", [PASSAGE], evidence=True) == (False, False)
    assert quote_cuts("… drawn as circles.", [PASSAGE], evidence=True) == (True, False)
    assert quote_cuts("Outliers are drawn …", [PASSAGE], evidence=True) == (False, True)
    assert quote_cuts("1.5 times … as circles", [PASSAGE], evidence=True) == (False, False)  # a gap inside


def test_where_the_passage_does_not_show_what_came_before_the_first_letter_decides():
    chunk = "ment variable before running the program. Set it once."
    assert quote_cuts("ment variable before running", [chunk], evidence=True) == (True, False)
    assert quote_cuts("Set it once.", ["Set it once."], evidence=True) == (False, False)
    assert quote_cuts("ment variable", [], evidence=True) == (True, False)  # no passage at hand
    assert quote_cuts("Variable names", [], evidence=True) == (False, False)


def test_ideographs_have_no_word_boundary_to_cut():
    assert quote_cuts("默认值为三十一", ["边框的默认值为三十一。"], evidence=True) == (False, False)
    assert quote_cuts("ault 31", ["默认 default 31"], evidence=True) == (True, False)


def test_the_quoted_spans_of_an_answer_are_its_evidence_and_its_quotation_marks():
    text = (
        'The documents say:\n\n"a.pdf", page 3: “kers reach 1.5 times” [1]\n'
        "另见「Outliers are drawn as circles.」 and “a name nobody quoted”"
    )
    given = answer(text, evidence=[("kers reach 1.5 times", PASSAGE)])
    given["citations"] = [{"file": "a.pdf", "page": 3, "text": PASSAGE}]
    # The evidence quote once (the text repeats it), the corner-bracket quote of the passage;
    # the file name and a span of no passage are no quotes of the documents.
    assert quoted_spans(given) == [(True, False), (False, False)]
    scores = answer_scores(question(), given)
    assert scores["midword_quotes"] == 0.5
    assert scores["midword_quote_ends"] == 0.0
    assert scores["quoted"] == 2.0
    assert answer_scores(question(), answer("31 [1]"))["midword_quotes"] is None


def test_the_share_of_quotes_cut_is_pooled_over_the_quotes_of_a_slice():
    questions = [
        question(),
        question(lang="zh"),
        Question(id="u", question="?", lang="zh", type="unanswerable", gold=frozenset()),
    ]
    rows = [
        answer_scores(questions[0], answer(evidence=[("kers reach", PASSAGE)])),
        answer_scores(
            questions[1],
            answer(evidence=[("Whiskers reach", PASSAGE), ("Outliers are", PASSAGE), ("drawn as", PASSAGE)]),
        ),
        answer_scores(questions[2], answer("It is 42.", evidence=[("times the inter", PASSAGE)])),
    ]
    summary = answer_summary(questions, rows, [1.0] * 3)
    assert summary["overall"]["midword_quotes"] == 0.2  # 1 of 5 quotes, not the mean of 1, 0 and 0
    assert summary["overall"]["midword_quote_ends"] == 0.2
    assert summary["by_lang"]["zh"]["midword_quotes"] == 0.0
    assert summary["by_type"]["unanswerable"]["median_chars"] == 9.0  # answered, so read


# The calibration half and the held-out half


def test_files_alternate_between_the_halves_in_the_order_of_their_names_hashes():
    names = ["a.pdf", "b.pdf", "c.png", "d.md", "e.csv"]  # by sha256: e.csv, c.png, d.md, b.pdf, a.pdf
    assert split_halves(names) == {
        "e.csv": "calibration",
        "c.png": "held-out",
        "d.md": "calibration",
        "b.pdf": "held-out",
        "a.pdf": "calibration",
    }
    assert split_halves(reversed(names)) == split_halves(names)


def test_a_question_takes_its_first_gold_files_half_or_without_gold_its_ids():
    halves = {"a.pdf": "held-out", "b.pdf": "calibration"}
    assert question_half("q", "a.pdf", halves) == "held-out"
    assert question_half("q", "c.pdf", halves) == ""  # a file the manifests do not split
    assert question_half("u2", None, halves) == "calibration"  # sha256("u2") is even
    assert question_half("u1", None, halves) == "held-out"  # and sha256("u1") odd


def test_questions_beside_split_manifests_are_summed_up_per_half(tmp_path):
    (tmp_path / "manifest-en.jsonl").write_text(
        '{"file": "a.pdf", "half": "held-out"}\n\n{"file": "b.pdf", "half": "calibration"}\n', encoding="utf-8"
    )
    lines = [
        {
            "id": "f",
            "question": "?",
            "lang": "en",
            "type": "fact",
            "gold": [{"file": "b.pdf", "page": 1}, {"file": "a.pdf", "page": 1}],
            "keys": ["31"],
        },
        {
            "id": "t",
            "question": "?",
            "lang": "zh",
            "type": "table",
            "gold": [{"file": "a.pdf", "page": 2}],
            "keys": ["7"],
        },
        {"id": "u2", "question": "?", "lang": "zh", "type": "unanswerable", "gold": []},
    ]
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    questions = load_questions(path)
    assert [q.half for q in questions] == ["calibration", "held-out", "calibration"]
    rows = [
        answer_scores(questions[0], answer("31 [1]", cites=[("b.pdf", 1)])),
        answer_scores(questions[1], answer("No.", cites=[("a.pdf", 2)])),
        answer_scores(questions[2], answer(abstain=True)),
    ]
    summary = answer_summary(questions, rows, [1.0, 2.0, 3.0])
    assert summary["by_half"]["calibration"]["keys_all"] == 1.0
    assert summary["by_half"]["held-out"]["keys_all"] == 0.0
    assert set(summary["by_half_lang"]) == {"calibration/en", "calibration/zh", "held-out/zh"}
    assert summary["by_half_type"]["calibration/unanswerable"]["abstain_correct"] == 1.0
    printed = format_answers({"questions": 3, "summary": summary})
    assert "held-out/table" in printed
    assert "keys_200" in printed
    assert "median_chars" in printed
    assert format_halves(questions).splitlines()[1:] == [
        f"{'':<14}{'fact':>13}{'table':>13}{'unanswerable':>13}{'en':>13}{'zh':>13}{'all':>13}",
        f"{'calibration':<14}{1:>13}{0:>13}{1:>13}{1:>13}{1:>13}{2:>13}",
        f"{'held-out':<14}{0:>13}{1:>13}{0:>13}{0:>13}{1:>13}{1:>13}",
    ]

    (tmp_path / "manifest-en.jsonl").write_text('{"file": "a.pdf", "half": "tuning"}\n', encoding="utf-8")
    with pytest.raises(QuestionFileError, match="half"):
        load_questions(path)


def test_the_public_set_is_split_by_file_into_two_halves_of_every_kind():
    """Each manifest's files are split evenly, every question has a half, and each half holds
    every kind of question in both languages (the counts: `manage.py evaluate` prints them)."""
    for manifest in sorted(PUBLIC.glob("manifest-*.jsonl")):
        counted = Counter(entry["half"] for entry in _entries(manifest))
        assert set(counted) == set(HALVES)
        assert abs(counted["calibration"] - counted["held-out"]) <= 1, manifest.name
    questions = load_questions(PUBLIC / "questions.jsonl")
    assert all(q.half in HALVES for q in questions)
    for half in HALVES:
        assert {(q.type, q.lang) for q in questions if q.half == half} == {(q.type, q.lang) for q in questions}


def _entries(manifest: Path) -> list[dict]:
    return [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines() if line.strip()]

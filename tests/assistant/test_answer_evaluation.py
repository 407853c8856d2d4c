"""The answer metrics of `manage.py evaluate --answers`, by hand."""

from __future__ import annotations

import pytest

from assistant.answering.evaluation import answer_scores, answer_summary, key_coverage, percentile
from assistant.answering.values import normalise
from assistant.retrieval.evaluation import Question, QuestionFileError, parse_question


def question(kind: str = "fact", gold=(("a.pdf", 3),), keys=(("31",),), lang: str = "en") -> Question:
    return Question(id=kind, question="?", lang=lang, type=kind, gold=frozenset(gold), keys=tuple(keys))


def answer(text: str = "", cites=(), attachments=(), abstain: bool = False) -> dict:
    return {
        "answer": text,
        "abstain": abstain,
        "citations": [{"file": f, "page": p} for f, p in cites],
        "attachments": [{"file": f, "page": p} for f, p in attachments],
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

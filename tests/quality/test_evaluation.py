"""The evaluation of an index version on golden questions (quality/evaluation.py) and the
gate's decision rule, by hand; the runs with a real worker are in test_quality_loop.py."""

from __future__ import annotations

import pytest

from knowledge.models import IndexVersion
from quality import evaluation
from quality.models import GoldenQuestion
from tests.conftest import make_collection

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]


def test_a_gold_entry_without_a_page_takes_any_page_of_its_file():
    gold = frozenset({("a.pdf", 0), ("b.pdf", 3)})
    ranked = evaluation.as_ranked([("b.pdf", 2), ("a.pdf", 7), ("b.pdf", 3)], gold)
    assert ranked == [("b.pdf", 2), ("a.pdf", 0), ("b.pdf", 3)]


def test_drops_are_points_of_each_gated_metric_overall():
    before = {"overall": {"hit@1": 0.50, "hit@3": 0.6, "hit@5": 0.80, "mrr": 0.600, "ndcg@10": 0.7}}
    after = {"overall": {"hit@1": 0.45, "hit@3": 0.9, "hit@5": 0.85, "mrr": 0.585, "ndcg@10": 0.1}}
    assert evaluation.drops(before, after) == {"hit@1": 5.0, "hit@5": -5.0, "mrr": 1.5}


@pytest.mark.parametrize(
    ("dropped", "allowed", "passes"),
    [
        ({"hit@1": 2.0, "hit@5": 0.0, "mrr": -3.0}, 2.0, True),  # exactly the allowance passes
        ({"hit@1": 2.01, "hit@5": 0.0, "mrr": 0.0}, 2.0, False),
        ({"hit@1": -10.0, "hit@5": 0.5, "mrr": 0.0}, 0.0, False),  # any one metric is enough to hold
        ({"hit@1": 30.0, "hit@5": 30.0, "mrr": 30.0}, 100.0, True),
    ],
)
def test_a_version_passes_when_no_gated_metric_drops_more_than_allowed(dropped, allowed, passes):
    assert evaluation.passes(dropped, allowed) is passes


def test_the_allowed_drop_is_the_collections_setting_or_the_portals(alice, settings):
    settings.GATE_POINTS = 2.0
    collection = make_collection(alice, "gated")
    assert evaluation.allowed_drop(collection) == 2.0
    collection.settings = {"gate_points": 5}
    assert evaluation.allowed_drop(collection) == 5.0
    collection.settings = {"gate_points": None}  # emptied in the settings form: the default again
    assert evaluation.allowed_drop(collection) == 2.0


def test_a_question_whose_file_is_gone_is_stale_and_left_out(alice):
    from ingestion.actions import do_add_document

    collection = make_collection(alice, "stale")
    do_add_document(collection, "kept.md", b"# Kept\n\nstill here", enqueue=False)
    make = GoldenQuestion.objects.create
    make(collection=collection, key="kept", question="q1", lang="en", gold=[{"file": "kept.md", "page": 1}])
    make(collection=collection, key="gone", question="q2", lang="en", gold=[{"file": "gone.pdf", "page": 2}])
    make(collection=collection, key="none", question="q3", lang="en", kind="unanswerable", gold=[])
    found = evaluation.questions_of(collection)
    assert [question.id for question in found.usable] == ["kept", "none"]
    assert found.stale == ["gone"]
    assert found.usable[0].gold == frozenset({("kept.md", 1)})


def test_a_golden_question_becomes_the_evaluations_question(alice):
    collection = make_collection(alice, "shape")
    golden = GoldenQuestion.objects.create(
        collection=collection,
        key="k",
        question="Which switch?",
        lang="en",
        kind="followup",
        gold=[{"file": "a.pdf", "page": 3}, {"file": "b.pdf"}],
        keys=["-d", ["--default", "-D"]],
        history=[{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "reply"}],
    )
    question = evaluation.as_question(golden)
    assert question.gold == frozenset({("a.pdf", 3), ("b.pdf", 0)})
    assert question.keys == (("-d",), ("--default", "-D"))
    assert question.history == (("user", "earlier"), ("assistant", "reply"))
    assert question.type == "followup"
    assert question.answerable


def test_the_pinned_scope_reads_one_version_whatever_is_active(alice):
    collection = make_collection(alice, "pinned")
    version = IndexVersion.objects.create(collection=collection, number=4, embedder_id="e", dims=4, config_hash="")
    scope = evaluation.pinned(version)
    assert scope.versions == (version,)
    assert scope.params == ([version.pk],)

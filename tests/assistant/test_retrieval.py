"""Hybrid retrieval on real PostgreSQL + pgvector with the local embedder: BM25 equal to a
reference implementation, Chinese and numbers matched literally, HNSW with filters, access
inside the SQL, RRF, weights, rerank cap and media intent."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from django.db import connection, transaction

from assistant.retrieval.fusion import media_intent, rrf, source_weight, weighted
from assistant.retrieval.lexical import query_terms, search_lexical
from assistant.retrieval.scope import scope_for
from assistant.retrieval.search import search
from ingestion.actions import do_add_document
from knowledge import actions
from knowledge.models import Chunk, Collection, IndexVersion, Page, TermStat
from providers import registry
from tests.conftest import token_for
from tests.ingestion.files import ingest as ingest_one

pytestmark = pytest.mark.usefixtures("media")

DOCS = {
    "travel.md": "# 差旅政策\n\n员工出差的住宿标准按城市等级执行，北京每晚不超过600元。\n\n"
    "# Taxis\n\nTaxi receipts are reimbursed within 30 days of the trip.",
    "payroll.md": "# 工资发放\n\n每月14号发放上月工资。\n\n# 报销\n\n每月7号集中处理报销单。",
    "security.md": "# IT security\n\nPasswords must be rotated every 90 days. Lost laptops are reported to IT at once.",
    "leave.md": "# 年假\n\n入职满一年的员工享有五天带薪年假，年假需提前一周申请。\n\n"
    "# Sick leave\n\nSick leave needs a doctor's note after two days.",
}


def ingest(collection: Collection, docs: dict[str, str]) -> None:
    for name, text in docs.items():
        ingest_one(collection, name, text.encode())


@pytest.fixture
def corpus(db, private_collection) -> Collection:
    ingest(private_collection, DOCS)
    private_collection.refresh_from_db()
    return private_collection


def test_bm25_equals_the_reference_implementation(corpus, alice):
    import bm25s

    version = IndexVersion.objects.get(pk=corpus.active_version_id)
    chunks = list(Chunk.objects.filter(index_version=version).order_by("pk"))
    tokens = [[term for term, count in chunk.terms.items() for _ in range(count)] for chunk in chunks]
    reference = bm25s.BM25(k1=1.2, b=0.75, method="lucene", dtype="float64")
    reference.index(tokens, show_progress=False)
    assert version.chunk_count == len(chunks)
    assert version.total_length == sum(chunk.length for chunk in chunks)
    scope = scope_for(alice, [corpus.pk])
    for query in ("北京住宿标准", "taxi receipts reimbursed", "14号工资", "leave 年假 申请", "laptops"):
        wanted = [term for term in query_terms(query) if term in reference.vocab_dict]
        expected = reference.get_scores(wanted)
        got = dict(search_lexical(scope, query, k=100))
        assert got, query
        for chunk, score in zip(chunks, expected, strict=True):
            assert got.get(chunk.pk, 0.0) == pytest.approx(float(score), abs=1e-6), (query, chunk.text)


def test_numbers_and_chinese_match_literally(corpus, alice):
    scope = scope_for(alice)
    (best, _score), *_ = search_lexical(scope, "14号", k=5)
    assert "14号" in Chunk.objects.get(pk=best).text
    (best, _score), *_ = search_lexical(scope, "住宿标准", k=5)  # no spaces to split on
    assert "住宿标准" in Chunk.objects.get(pk=best).text


def test_statistics_follow_what_is_searchable(corpus, alice):
    version = IndexVersion.objects.get(pk=corpus.active_version_id)
    before = TermStat.objects.get(index_version=version, term="14").df
    assert before == 1
    actions.do_delete_document(corpus.documents.get(rel_path="payroll.md"))
    version.refresh_from_db()
    assert not TermStat.objects.filter(index_version=version, term="14").exists()
    assert version.chunk_count == Chunk.objects.filter(index_version=version).count()


def test_hybrid_search_finds_the_right_chunk_in_both_languages(corpus, alice):
    results = search(alice, "北京出差每晚住宿最多多少钱", rerank=False)
    assert "600" in results.hits[0].text
    assert set(results.hits[0].channels) == {"lexical", "dense"}
    results = search(alice, "How long do I have to hand in taxi receipts?", rerank=False)
    assert "30 days" in results.hits[0].text
    hit = results.hits[0]
    assert (hit.document_name, hit.page_number) == ("travel.md", 2)
    assert hit.location["heading_path"] == ["Taxis"]


def test_the_hits_beyond_k_follow_the_first_k_and_change_nothing_of_them(corpus, alice):
    query = "How long do I have to hand in taxi receipts?"
    ten = search(alice, query, k=10, rerank=False)
    four = search(alice, query, k=4, rerank=False, beyond=6)
    assert len(ten.hits) > 4
    assert [hit.chunk_id for hit in four.hits] == [hit.chunk_id for hit in ten.hits[:4]]
    assert [hit.chunk_id for hit in four.later] == [hit.chunk_id for hit in ten.hits[4:]]
    assert search(alice, query, k=4, rerank=False).later == ()


def test_a_user_never_gets_a_chunk_they_cannot_see(corpus, alice, charlie, api):
    secret = actions.do_create_collection(charlie, "charlie's")
    ingest(secret, {"secret.md": "# Secret\n\n北京每晚住宿标准是九百九十九元，这是机密。"})
    query = "北京每晚住宿标准是九百九十九元"
    for channels in (("lexical",), ("dense",), ("lexical", "dense", "image")):
        found = search(alice, query, channels=channels, rerank=False)
        assert found.hits
        assert all(hit.collection_id == corpus.pk for hit in found.hits)
        assert all("九百九十九" not in hit.text for hit in found.hits)
    assert search(alice, query, collection_ids=[secret.pk]).hits == ()
    token_for(api, alice)
    response = api.post("/api/search/", {"query": query, "collections": [secret.pk]}, format="json")
    assert response.status_code == 404
    assert "九百九十九" not in response.content.decode()
    response = api.post("/api/search/", {"query": query, "k": 3}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert all("九百九十九" not in hit["text"] and hit["collection_id"] == corpus.pk for hit in body["hits"])
    assert len(body["hits"]) == 3
    assert body["hits"][0]["channels"]["lexical"]["rank"] >= 1
    assert body["hits"][0]["render_url"].startswith("/api/pages/")


def test_filtered_hnsw_still_returns_k_results(corpus, alice):
    """A version where most chunks belong to a document still being indexed (not searchable):
    the iterative scan keeps reading the graph until k searchable chunks are found."""
    version = IndexVersion.objects.get(pk=corpus.active_version_id)
    hidden = do_add_document(corpus, "hidden.md", b"# Hidden\n\nnot yet", enqueue=False)[0]
    page = hidden.pages.create(number=1, kind="section", content_sha256="0" * 64)
    vector = registry.text_embedder().embed_query("北京出差每晚住宿")
    Chunk.objects.bulk_create(
        Chunk(
            index_version=version,
            document=hidden,
            page=page,
            ordinal=n,
            kind="text",
            text=f"hidden {n}",
            location={"page": 1},
            embedding=[v + (n % 7) * 1e-4 for v in vector],
            content_sha256=str(n),
        )
        for n in range(2000)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_chunk")
    found = search(alice, "北京出差每晚住宿", channels=("dense",), rerank=False, k=5)
    assert len(found.hits) == 5
    assert all(hit.document_name != "hidden.md" for hit in found.hits)
    from assistant.retrieval.dense import statement

    query = statement(scope_for(alice), [version], "c.embedding", lambda v: v.dims, "", vector, 5)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + query.sql, query.params)
        plan = " ".join(row[0] for row in cursor.fetchall())
    assert f"chunk_hnsw_v{version.pk}" in plan


def test_rrf_and_source_weights_on_hand_computed_cases():
    fused = rrf({"lexical": [1, 2, 3], "dense": [3, 1]}, k=60)
    assert fused[1] == pytest.approx(1 / 61 + 1 / 62)
    assert fused[3] == pytest.approx(1 / 63 + 1 / 61)
    assert fused[2] == pytest.approx(1 / 62)
    assert rrf({"lexical": [1], "dense": [2]}, {"lexical": 2.0, "dense": 1.0})[1] == pytest.approx(2 / 61)
    rules = [{"pattern": "chat-logs/**", "weight": 0.3}, {"pattern": "core/", "weight": 1.0}]
    assert source_weight("chat-logs/2024/may.md", rules) == 0.3
    assert source_weight("core/policy.pdf", rules) == 1.0
    assert source_weight("other.md", rules) == 1.0
    finals = weighted({1: 0.9, 2: 1.0, 3: 0.5}, {1: 1.0, 2: 0.3, 3: 1.0})
    assert finals[1] == pytest.approx((0.4 / 0.5 * 0.9 + 0.1) * 2)  # 1.64
    assert finals[2] == pytest.approx(1.0 * 1.3)  # the best match, from a 0.3 source
    assert finals[3] == pytest.approx(0.1 * 2)  # the weakest keeps a little
    assert finals[1] > finals[2] > finals[3]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("活动海报长什么样", True),
        ("给我看一下培训视频", True),
        ("show me a picture of the office", True),
        ("Is there a video of the onboarding talk?", True),
        ("那张消防车照片里的车是什么颜色？", True),
        ("有一张字体宣传图，说这款字体收了多少字？", True),
        ("What colour is the pickup truck in the orchard?", True),
        ("Do we have a portrait of the founder?", True),
        ("What product is advertised on the scanned brochure page?", True),
        ("扫描件里的合同金额是多少", True),
        ("What does the scan command of the tool do?", False),
        ("这张表里的数字是多少", False),
        ("退票怎么退款", False),
        ("How do I get a refund for a ticket?", False),
        ("报销流程是什么", False),
    ],
)
def test_media_intent_in_both_languages(query, expected):
    assert media_intent(query) is expected


class CountingReranker:
    model_id = "test:counting"

    def __init__(self) -> None:
        self.passages: list[int] = []

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.passages.append(len(passages))
        return [float("600" in passage) for passage in passages]


def test_the_reranker_sees_at_most_the_candidate_cap(corpus, alice, monkeypatch, settings):
    """An adapter-boundary fake: the real rerankers are tested in tests/assistant."""
    settings.RERANK_CANDIDATES = 3
    reranker = CountingReranker()
    monkeypatch.setattr(registry, "available", lambda role: role == "rerank")
    monkeypatch.setattr(registry, "reranker", lambda: reranker)
    results = search(alice, "taxi 住宿 工资 年假 laptops", channels=("lexical",), k=8)
    assert reranker.passages == [3]
    assert results.reranker == "test:counting"
    reranked = [hit for hit in results.hits if hit.rerank is not None]
    assert len(reranked) == 3
    assert sum(hit.rerank is not None for hit in results.hits[:3]) == 3  # they keep the top slots


def test_the_admin_test_search_shows_every_stage(admin_client, corpus, client, bob):
    page = admin_client.get(f"/admin/knowledge/collection/{corpus.pk}/change/").content.decode()
    assert f"/admin/knowledge/collection/{corpus.pk}/search/" in page
    response = admin_client.get(f"/admin/knowledge/collection/{corpus.pk}/search/", {"q": "北京住宿标准"})
    body = response.content.decode()
    assert response.status_code == 200
    assert "travel.md" in body
    assert "(#1)" in body  # a channel's rank
    assert "600" in body
    bob.is_staff = True
    bob.save()
    client.force_login(bob)  # staff who cannot see the collection: 404, as everywhere in the admin
    assert client.get(f"/admin/knowledge/collection/{corpus.pk}/search/", {"q": "北京"}).status_code in (403, 404)


def test_reading_rare_terms_first_gives_the_exact_top_k(corpus, alice, monkeypatch):
    from django.test.utils import CaptureQueriesContext

    from assistant.retrieval import lexical

    scope = scope_for(alice)
    reads = []
    for query in ("employees leave 年假 员工", "报销 工资 每月", "sick leave doctor"):
        pruned = search_lexical(scope, query, k=2)
        exhaustive = search_lexical(scope, query, k=1000)[:2]  # fewer than k: every chunk read
        monkeypatch.setattr(lexical, "MAX_TERMS", 0)  # one set per term that must be read
        assert pruned == exhaustive == search_lexical(scope, query, k=2)
        monkeypatch.setattr(lexical, "MAX_TERMS", 12)
        # The second read skips the sets the first covered (a scope holding most of the
        # index), or reads them again (a small share of it): the same top k either way.
        for share in (0, 10**9):
            monkeypatch.setattr(lexical, "WIDE_SHARE", share)
            with CaptureQueriesContext(connection) as queries:
                assert search_lexical(scope, query, k=2) == exhaustive, (query, share)
            reads.append(sum("candidates AS" in q["sql"] for q in queries.captured_queries))
    assert 2 in reads  # some query needed the second read


def test_term_bounds_are_upper_bounds_that_prune_exactly(corpus, alice, monkeypatch, settings):
    from assistant.retrieval import lexical
    from ingestion import stats

    version = IndexVersion.objects.get(pk=corpus.active_version_id)
    chunks = list(Chunk.objects.filter(index_version=version))
    avgdl = version.total_length / version.chunk_count
    k1, b = settings.BM25_K1, settings.BM25_B
    for stat in TermStat.objects.filter(index_version=version):
        held = [(chunk.terms[stat.term], chunk.length) for chunk in chunks if stat.term in chunk.terms]
        assert stat.max_tf == max(tf for tf, _ in held)
        assert stat.max_tf_share == pytest.approx(max(tf / length for tf, length in held))
        best = max(tf / (tf + k1 * (1 - b + b * length / avgdl)) for tf, length in held)
        assert best <= lexical.tf_bound(stat.max_tf, stat.max_tf_share, avgdl, k1, b) * lexical.MARGIN
    # Counting a document out leaves the bounds as they were: still upper bounds.
    before = dict(TermStat.objects.filter(index_version=version).values_list("term", "max_tf"))
    stats.add_document(version.pk, corpus.documents.get(rel_path="payroll.md").pk, -1)
    after = dict(TermStat.objects.filter(index_version=version).values_list("term", "max_tf"))
    assert after
    assert all(after[term] == before[term] for term in after)
    stats.add_document(version.pk, corpus.documents.get(rel_path="payroll.md").pk, 1)
    scope = scope_for(alice)
    for query in ("employees leave 年假 员工", "报销 工资 每月 14号", "sick leave doctor note", "taxi 北京 住宿标准"):
        pruned = search_lexical(scope, query, k=2)
        assert pruned == search_lexical(scope, query, k=1000)[:2], query  # fewer than k: every chunk read
        monkeypatch.setattr(lexical, "MAX_SETS", 0)  # one set per needed term
        assert pruned == search_lexical(scope, query, k=2), query
        monkeypatch.setattr(lexical, "MAX_SETS", 24)


def test_the_global_index_serves_many_versions_and_keeps_access(corpus, alice, charlie, monkeypatch):
    """Over many versions, one filtered walk of the index of every version's chunks of these
    dims: the same hits as one walk per version, and never another user's chunk."""
    from assistant.retrieval import dense

    secret = actions.do_create_collection(charlie, "charlie's")
    ingest(secret, {"secret.md": "# Secret\n\n北京每晚住宿标准是九百九十九元，这是机密。"})
    scope = scope_for(alice)
    version = scope.versions[0]
    vector = registry.text_embedder().embed_query("北京每晚住宿标准是九百九十九元")
    per_version = dense.search_dense(scope, vector, version.embedder_id, 5)
    monkeypatch.setattr(dense, "MANY_VERSIONS", 1)
    query = dense.statement(scope, [version], "c.embedding", lambda v: v.dims, "", vector, 5)
    with transaction.atomic(), connection.cursor() as cursor:  # a table this small is read whole
        cursor.execute("SET LOCAL enable_seqscan = off")  # so this shows the index can serve it
        cursor.execute("EXPLAIN " + query.sql, query.params)
        plan = " ".join(row[0] for row in cursor.fetchall())
    assert f"chunk_hnsw_d{version.dims}" in plan
    assert query.ef_search >= dense.GLOBAL_EF_SEARCH
    found = dense.search_dense(scope, vector, version.embedder_id, 5)
    assert [pk for pk, _ in found] == [pk for pk, _ in per_version]
    assert [score for _, score in found] == pytest.approx([score for _, score in per_version])
    visible = set(Chunk.objects.filter(index_version=version).values_list("pk", flat=True))
    assert {pk for pk, _ in found} <= visible
    results = search(alice, "北京每晚住宿标准是九百九十九元", channels=("dense",), rerank=False)
    assert results.hits
    assert all(hit.collection_id == corpus.pk for hit in results.hits)


def test_the_global_index_is_skipped_for_a_small_share(corpus, alice, monkeypatch):
    from assistant.retrieval import dense

    scope = scope_for(alice)
    monkeypatch.setattr(dense, "MANY_VERSIONS", 1)
    monkeypatch.setattr(dense, "MIN_SHARE", 1.01)  # the scope would need more than the whole index
    vector = registry.text_embedder().embed_query("taxi")
    query = dense.statement(scope, list(scope.versions), "c.embedding", lambda v: v.dims, "", vector, 5)
    assert "UNION ALL" not in query.sql
    assert "vector_dims" not in query.sql
    assert "c.index_version_id = %s" in query.sql


def test_several_small_versions_are_scanned_exactly_and_keep_access(
    corpus, team_collection, alice, charlie, monkeypatch
):
    """Several versions with few chunks in all: every distance over their rows (no graph
    walked), the same hits as one walk per version, and never another user's chunk."""
    from assistant.retrieval import dense

    ingest(
        team_collection, {"handbook.md": "# 住宿\n\n北京出差每晚住宿不超过八百元。\n\n# Taxis\n\nTaxis after 22:00."}
    )
    secret = actions.do_create_collection(charlie, "charlie's")
    ingest(secret, {"secret.md": "# Secret\n\n北京每晚住宿标准是九百九十九元，这是机密。"})
    scope = scope_for(alice)
    versions = list(scope.versions)
    assert len(versions) == 2
    vector = registry.text_embedder().embed_query("北京每晚住宿标准是九百九十九元")
    query = dense.statement(scope, versions, "c.embedding", lambda v: v.dims, "", vector, 5)
    assert "near AS MATERIALIZED" in query.sql
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # the graphs would serve if the planner could use them
        cursor.execute("EXPLAIN " + query.sql, query.params)
        plan = " ".join(row[0] for row in cursor.fetchall())
    assert "hnsw" not in plan
    exact = dense.search_dense(scope, vector, versions[0].embedder_id, 5)
    visible = Chunk.objects.filter(index_version__in=versions, searchable=True, embedding__isnull=False)
    everything = dense.search_dense(scope, vector, versions[0].embedder_id, 1000)
    assert sorted(pk for pk, _ in everything) == sorted(visible.values_list("pk", flat=True))
    assert everything[:5] == exact
    monkeypatch.setattr(dense, "EXACT_CHUNKS", 0)  # one graph walk per version
    monkeypatch.setattr(dense, "EXACT_PER_VERSION", 0)
    assert "UNION ALL" in dense.statement(scope, versions, "c.embedding", lambda v: v.dims, "", vector, 5).sql
    walked = dense.search_dense(scope, vector, versions[0].embedder_id, 5)
    assert [pk for pk, _ in walked] == [pk for pk, _ in exact]
    assert [score for _, score in walked] == pytest.approx([score for _, score in exact])


def test_lexical_candidates_by_version_or_by_index_agree(corpus, alice, monkeypatch):
    from assistant.retrieval import lexical

    scope = scope_for(alice)
    for query in ("北京住宿标准", "taxi receipts reimbursed", "leave 年假 申请", "每月 报销 工资 14号"):
        monkeypatch.setattr(lexical, "SCAN_CHUNKS", 10**9)
        by_version = search_lexical(scope, query, k=5)
        monkeypatch.setattr(lexical, "SCAN_CHUNKS", 0)
        by_index = search_lexical(scope, query, k=5)
        assert by_version, query
        assert by_version == by_index, query


def test_lexical_reads_by_version_only_for_a_small_scope(corpus, alice, monkeypatch):
    from django.test.utils import CaptureQueriesContext

    from assistant.retrieval import lexical

    scope = scope_for(alice)
    for limit, expected in ((10**9, "jsonb_exists_any"), (0, "?|")):
        monkeypatch.setattr(lexical, "SCAN_CHUNKS", limit)
        with CaptureQueriesContext(connection) as queries:
            search_lexical(scope, "taxi", k=5)
        reading = [q["sql"] for q in queries.captured_queries if "candidates AS" in q["sql"]]
        assert reading
        assert all(expected in sql for sql in reading)
        # The GIN path keeps the planner off the version's b-tree (index scans off, bitmap scans on).
        settings_ = [q["sql"] for q in queries.captured_queries if "enable_indexscan" in q["sql"]]
        assert len(settings_) == (0 if limit else len(reading))


def test_batched_statistics_equal_per_document_ones(corpus):
    from ingestion import stats

    version = IndexVersion.objects.get(pk=corpus.active_version_id)
    before = dict(TermStat.objects.filter(index_version=version).values_list("term", "df"))
    documents = list(corpus.documents.values_list("pk", flat=True))
    stats.add_documents(version.pk, documents, -1)
    version.refresh_from_db()
    assert (version.chunk_count, version.total_length) == (0, 0)
    assert not TermStat.objects.filter(index_version=version).exists()
    assert not Chunk.objects.filter(index_version=version, searchable=True).exists()
    stats.add_documents(version.pk, documents, 1)
    version.refresh_from_db()
    assert dict(TermStat.objects.filter(index_version=version).values_list("term", "df")) == before
    assert version.chunk_count == Chunk.objects.filter(index_version=version, searchable=True).count() > 0


def test_deleting_a_collection_skips_counting_each_document_out(corpus):
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        actions.do_delete_collection(corpus)
    assert not [q for q in queries.captured_queries if "knowledge_termstat" in q["sql"] and "INSERT" in q["sql"]]
    assert not Chunk.objects.filter(document__collection_id=corpus.pk).exists()


def test_queries_are_embedded_on_one_thread_and_documents_keep_theirs(db):
    from providers.local import embedder as local

    embedder = registry.text_embedder()
    if not isinstance(embedder, local.LocalEmbedder):
        pytest.skip("the local embedder's threads")
    engine = embedder._engine()
    before = engine._lib.omp_get_max_threads()
    seen: list[int] = []
    real = engine.query

    def query(text: str) -> object:
        seen.append(engine._lib.omp_get_max_threads())
        return real(text)

    engine.query = query
    try:
        vector = embedder.embed_query("北京出差住宿标准")
    finally:
        del engine.query
    assert seen == [local.QUERY_THREADS]
    assert engine._lib.omp_get_max_threads() == before
    assert vector == pytest.approx([float(x) for x in real("北京出差住宿标准")], abs=1e-5)


def test_a_pictures_match_counts_a_words_plural_and_a_chinese_words_head_noun():
    from assistant.retrieval.pictures import coverage, forms, weights

    assert forms("boats") == ["boats", "boat"]
    assert forms("小狗") == ["小狗", "狗"]
    assert forms("glass") == ["glass"]
    counts = {"photo": 40, "boat": 2, "dog": 3, "狗": 3, "sunset": 0, "小狗": 0, "boats": 0}
    boats = weights(["photo", "boats", "sunset"], counts, 40)
    assert set(boats) == {"boats", "sunset"}  # "photo" only asks for a picture
    assert boats["sunset"] == pytest.approx(0.25 * boats["boats"])  # no picture holds it
    assert coverage(["boat", "photo"], boats) == pytest.approx(1 / 1.25)
    dogs = weights(["小狗"], counts, 40)
    assert coverage(["狗"], dogs) == 1.0
    assert coverage(["绿色", "photo"], weights(["绿色", "长颈鹿"], {"绿色": 5, "长颈鹿": 0}, 40)) == 0.0


def test_a_pictures_match_hears_an_everyday_word_for_the_label_a_tagger_gives():
    from assistant.retrieval.pictures import coverage, forms, weights

    assert forms("kittens") == ["kittens", "kitten", "cat"]
    assert forms("花上") == ["花上", "上", "花"]  # a place the word ends in, then the noun
    assert forms("鸭子")[-2:] == ["公鸭", "鸟"]
    counts = {"cat": 1, "person": 6, "uniform": 2, "flag": 0}
    kitten = weights(["kitten"], counts, 30)
    assert coverage(["cat", "photo"], kitten) == 1.0
    woman = weights(["woman", "uniform", "flag"], counts, 30)
    assert woman["woman"] > 0  # weighed as "person", which six pictures hold
    assert coverage(["person", "uniform"], woman) > coverage(["uniform"], woman) > 0


def test_every_everyday_picture_word_leads_to_words_that_descriptions_use():
    """picture_words.tsv maps a question's word to the labels, families or COCO names of
    providers/local/labels, in English or Chinese: a target no description can hold
    would be a word that finds nothing."""
    import csv

    from assistant.retrieval.pictures import description_words
    from ingestion.terms import terms

    labels = Path(__file__).resolve().parents[2] / "providers" / "local" / "labels"
    said: set[str] = set()
    for name in ("imagenet.tsv", "coco.tsv"):
        with (labels / name).open(encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
                for column in ("en", "zh", "family_en", "family_zh"):
                    said |= set(terms(row[column]))
    words = description_words()
    assert len(words) >= 40
    for word, targets in words.items():
        assert targets, word
        for target in targets:
            assert target in said, f"{word} -> {target}: no label or family says it"


def test_a_follow_up_is_searched_with_its_earlier_question_in_search_as_in_ask(corpus, alice, charlie, api):
    """/api/search/ with a conversation searches a follow-up that leans on an earlier turn
    with the earlier question, as the answer pipeline does; another user's conversation is
    not found."""
    from assistant.models import Conversation

    QUESTION = "Within how many days of the trip are taxi receipts reimbursed?"  # noqa: N806
    conversation = Conversation.with_history(
        alice, corpus, "年假", [("user", "入职满一年有几天年假？"), ("assistant", "五天 [1]。")]
    )
    token_for(api, alice)
    alone = api.post("/api/search/", {"query": "那需要提前多久申请？", "k": 3}, format="json").json()
    followed = api.post(
        "/api/search/", {"query": "那需要提前多久申请？", "k": 3, "conversation": conversation.pk}, format="json"
    ).json()
    assert followed["query"] == "入职满一年有几天年假？ 那需要提前多久申请？"
    assert alone["query"] == "那需要提前多久申请？"
    assert followed["hits"][0]["document_name"] == "leave.md"
    standalone = api.post(
        "/api/search/", {"query": QUESTION, "k": 3, "conversation": conversation.pk}, format="json"
    ).json()
    assert standalone["query"] == QUESTION  # leans on nothing: searched as asked
    theirs = Conversation.with_history(charlie, corpus, "x", [("user", "入职满一年有几天年假？")])
    response = api.post("/api/search/", {"query": "那呢？", "conversation": theirs.pk}, format="json")
    assert response.status_code == 404
    assert "年假" not in response.content.decode()


def test_unknown_words_are_those_no_visible_document_mentions(corpus, alice, charlie):
    from assistant.retrieval.lexical import unknown

    secret = actions.do_create_collection(charlie, "charlie's")
    ingest(secret, {"secret.md": "# Butterflies\n\n台北办公室的蝴蝶标本在三楼。"})
    scope = scope_for(alice)
    # Charlie's words are not Alice's
    assert unknown(scope, ["taxi", "butterflies", "台北", "带薪", "蝴蝶"]) == ["butterflies", "台北", "蝴蝶"]
    assert unknown(scope_for(charlie), ["butterflies", "台北", "taxi"]) == ["taxi"]
    assert unknown(scope, []) == []
    # 报销 and 标准 are said, but never in one chunk as 报销标准 would be
    assert unknown(scope, ["报销标准", "住宿标准"]) == ["报销标准"]


# A page of prose over a table whose rows the prose does not hold: the table's own chunk.
AGES = (
    "# Ages\n\nThe table below counts the subjects of the study by age group and sex. "
    "Each subject was followed from the first visit to the end of the study or to death, whichever "
    "came first, and was counted once in the group of the age reached at the first visit. Subjects "
    "who moved away before the end of the study were counted until they moved, and the years they "
    "were followed were added to the person-years of their group.\n\n"
    "| age | women | men |\n|---|---|---|\n| (40,51] | 1200 | 1100 |\n| (51,62] | 40034 | 39012 |\n"
)


def test_a_chunk_beside_the_passages_is_read_only_within_the_scope(corpus, alice, charlie):
    """A table's chunk on a passage's page comes in when the passages lack the row the
    question names (evidence.checked); Charlie's scope does not read Alice's pages."""
    from assistant.answering import evidence
    from assistant.answering.types import Source
    from assistant.retrieval.search import on_pages

    ingest(corpus, {"ages.md": AGES})
    chunks = list(Chunk.objects.filter(document__name="ages.md", searchable=True).order_by("ordinal"))
    prose = next(chunk for chunk in chunks if "(51,62]" not in chunk.text)
    table = next(chunk for chunk in chunks if "(51,62]" in chunk.text)
    found = search(alice, "subjects of the study by age group and sex", k=1)
    assert found.hits[0].chunk_id == prose.pk
    passages = (Source(1, found.hits[0]),)
    question = "How many women are in the age group (51,62]?"
    lacking = evidence.unsupported(question, passages)
    assert lacking == ["51", "62"]
    sources, lacking, nearby = evidence.checked(question, passages, scope_for(alice), lacking)
    assert nearby is not None
    assert nearby.hit.chunk_id == table.pk
    assert [source.hit.chunk_id for source in sources] == [table.pk]  # in place of the last passage
    assert lacking == []
    # Not a row that holds only some of the numbers asked: (62,73] is on no row.
    other = "How many women are aged (51,73]?"
    assert evidence.checked(other, passages, scope_for(alice), evidence.unsupported(other, passages))[2] is None
    # Charlie reads none of Alice's pages, whatever page ids he names.
    assert on_pages(scope_for(charlie), [prose.page_id]) == []
    assert evidence.checked(question, passages, scope_for(charlie), ["51", "62"]) == (passages, ["51", "62"], None)
    assert evidence.checked(question, passages, scope_for(alice), []) == (passages, [], None)  # nothing lacking
    assert [hit.chunk_id for hit in on_pages(scope_for(alice), [prose.page_id], exclude=[prose.pk])] == [table.pk]


def test_each_step_of_a_plan_brings_in_the_row_it_names_from_its_passages_pages(corpus, alice, charlie):
    """A multi-step answer checks each step's passages as a direct question's: the step that
    names a row its prose passage lacks gets the table's chunk on that page in place of its
    last passage, numbered as it was; the other step keeps its own. Not in Charlie's scope."""
    from types import SimpleNamespace

    from assistant.answering.session import Draft
    from assistant.answering.strategies import MultiStep
    from assistant.answering.types import Source, StepEvidence

    ingest(corpus, {"ages.md": AGES})
    chunks = list(Chunk.objects.filter(document__name="ages.md", searchable=True).order_by("ordinal"))
    table = next(chunk for chunk in chunks if "(51,62]" in chunk.text)
    prose = search(alice, "subjects of the study by age group and sex", k=1).hits[0]
    leave = search(alice, "sick leave doctor note", k=1).hits[0]
    assert prose.chunk_id != table.pk
    steps = ["How many women are in the age group (51,62]?", "After how many days is a note needed?"]

    def draft_for(user) -> Draft:
        session = SimpleNamespace(scope=scope_for(user), question=" and ".join(steps))
        draft = Draft(session=session)  # type: ignore[arg-type]
        draft.steps = [StepEvidence(1, steps[0], (prose,)), StepEvidence(2, steps[1], (leave,))]
        draft.sources = (Source(1, prose, 1), Source(2, leave, 2))
        return draft

    draft = draft_for(alice)
    MultiStep()._rows_beside(draft)
    assert [(source.number, source.hit.chunk_id, source.step) for source in draft.sources] == [
        (1, table.pk, 1),
        (2, leave.chunk_id, 2),
    ]
    assert [(d.stage, d.outcome, d.figures["step"]) for d in draft.trail.decisions] == [("anchors", "found", 1)]
    other = draft_for(charlie)
    MultiStep()._rows_beside(other)
    assert [source.hit.chunk_id for source in other.sources] == [prose.chunk_id, leave.chunk_id]


def test_a_cell_is_read_from_a_table_on_a_passages_own_page(corpus, alice, charlie, settings, monkeypatch, tmp_path):
    """A table whose caption is a passage but whose own chunk ranks under every other
    candidate is read for the cell the question names (answering.cells.search_with_cell looks
    at the passages' own pages, within the scope); Charlie's scope finds neither."""
    from docx import Document

    from assistant.answering import cells

    document = Document()
    document.add_heading("Programs", level=1)
    document.add_paragraph("Table 1.1 lists the text mode programs worth installing on a new system.")
    grid = document.add_table(rows=3, cols=3)
    rows = [("package", "popularity", "size"), ("mc", "V:54", "1482"), ("vim", "V:97", "3570")]
    for row, said in zip(grid.rows, rows, strict=True):
        for cell, text in zip(row.cells, said, strict=True):
            cell.text = text
    document.save(str(tmp_path / "programs.docx"))
    ingest_one(corpus, "programs.docx", (tmp_path / "programs.docx").read_bytes())
    settings.ANSWER_SOURCES = 1
    monkeypatch.setattr(cells, "CANDIDATES", 1)  # no later hit and one lexical one: only the page's own tables
    table = Chunk.objects.get(document__name="programs.docx", kind="table", searchable=True)
    question = "Table 1.1 lists the text mode programs worth installing: what is the size of mc?"
    results, sources, cell = cells.search_with_cell(alice, question, scope_for(alice))
    assert table.pk not in {hit.chunk_id for hit in [*results.hits, *results.later]}
    assert cell is not None
    assert (cell.row, cell.column, cell.value) == ("mc, V:54", "size", "1482")
    assert [source.hit.chunk_id for source in sources] == [table.pk]  # in place of the last passage
    _results, sources, cell = cells.search_with_cell(charlie, question, scope_for(charlie))
    assert (sources, cell) == ((), None)


def vignette_pdf() -> bytes:
    """Three pages: prose that mentions Table 1, then Table 1 and Table 2, each under its
    caption, their rows by age group (no word of a question about a cell)."""
    import pymupdf

    pdf = pymupdf.open()
    for text in (
        "Survival of the cohort. Table 1 shows the age distribution of the subjects in each group; "
        "the older subjects are more often in the high group.",
        "Table 1: Comparison of the age distributions.\nlow 50-59: 2585; 60-69: 1690; 70-79: 969",
        "Table 2: Women by age.\nlow 65-69: 512; 70-74: 376; 75-79: 401",
    ):
        page = pdf.new_page()
        page.insert_textbox(pymupdf.Rect(72, 72, 520, 760), text, fontsize=11)
    return pdf.tobytes()


def test_a_table_the_question_names_is_read_on_its_captions_page(corpus, alice, charlie):
    """A question that names "Table 1" and a row its passages lack reads the page that
    captions Table 1 (evidence.tables_named), before the passages' own pages; only the
    passages' documents, and only in the asker's scope."""
    from assistant.answering import evidence
    from assistant.answering.types import Source

    ingest_one(corpus, "vignette.pdf", vignette_pdf())
    pages = {page.number: page.pk for page in Page.objects.filter(document__name="vignette.pdf")}
    prose = next(
        hit for hit in search(alice, "age distribution of the subjects in each group", k=5).hits if hit.page_number == 1
    )
    passages = (Source(1, prose),)
    question = "How many subjects aged 70-79 are in the low group in Table 1?"
    assert evidence.tables_named(question, passages) == [pages[2], pages[1]]  # its caption's page first
    assert evidence.tables_named("表 2 里 70-74 岁的女性有多少？", passages) == [pages[3]]
    assert evidence.tables_named("How many subjects are aged 70-79?", passages) == []  # no table named
    lacking = evidence.unsupported(question, passages)
    assert lacking == ["70-79"]
    _sources, lacking, nearby = evidence.checked(question, passages, scope_for(alice), lacking)
    assert nearby is not None
    assert nearby.hit.page_number == 2
    assert lacking == []
    women = "How many women aged 70-74 are in Table 2?"
    nearby = evidence.checked(women, passages, scope_for(alice), evidence.unsupported(women, passages))[2]
    assert nearby is not None
    assert nearby.hit.page_number == 3
    assert evidence.checked(question, passages, scope_for(charlie), ["70-79"]) == (passages, ["70-79"], None)


ZHLIPSUM = (
    "# zhlipsum\n\nThe zhlipsum package typesets Chinese dummy text.\n\n"
    "# Paragraphs\n\n\\zhlipsum[-] produces all paragraphs of the dummy text.\n\n"
    "# Names\n\nThe dummy text nanshanjing has 43 paragraphs."
)


def test_a_name_the_passages_documents_lack_brings_in_the_closest_chunk_that_holds_it(corpus, alice, charlie):
    """A Chinese question naming an English package shares none of its manual's words but
    the name: the passages (about 年假) lack it, and a chunk of the manual that holds it (the
    closest to the question of those that do) comes in as the first passage
    (evidence.elsewhere), in the asker's scope only; a lacking number is never looked for
    elsewhere, nor a name no document holds."""
    from assistant.answering import evidence
    from assistant.answering.types import Source

    ingest(corpus, {"zhlipsum.md": ZHLIPSUM})
    leave = search(alice, "年假需提前一周申请", k=2).hits
    passages = tuple(Source(number, hit) for number, hit in enumerate(leave, start=1))
    question = "用 zhlipsum 时，要输出全部段落，段落参数该怎么写？"
    assert evidence.unsupported(question, passages) == ["zhlipsum"]
    sources, lacking, nearby = evidence.checked(question, passages, scope_for(alice), ["zhlipsum"])
    assert nearby is not None
    assert lacking == []
    assert nearby.hit.document_name == "zhlipsum.md"
    assert "zhlipsum" in nearby.hit.text
    assert [source.number for source in sources] == [1, 2]  # it leads; the last passage gives way
    assert (sources[0].hit, sources[1].hit) == (nearby.hit, passages[0].hit)
    asked = "nanshanjing 这份假文有多少段？"
    named = evidence.checked(asked, passages, scope_for(alice), ["nanshanjing"])[2]
    assert named is not None
    assert "43 paragraphs" in named.hit.text
    assert evidence.checked(question, passages, scope_for(charlie), ["zhlipsum"]) == (passages, ["zhlipsum"], None)
    versioned = "zhlipsum 2.0 有哪些选项？"
    lacking = ["zhlipsum", "2.0"]
    assert evidence.checked(versioned, passages, scope_for(alice), lacking)[1:] == (lacking, None)
    assert evidence.checked(question, passages, scope_for(alice), ["zhlorem"])[1:] == (["zhlorem"], None)


def test_a_chunk_that_only_holds_the_name_is_not_brought_in_for_it(corpus, alice):
    """A near miss: the editor is named in a list of editors, which says nothing of its
    shortcuts (reader.about); a chunk about them is brought in."""
    from functools import partial

    from assistant.answering import evidence, reader
    from assistant.answering.types import Source

    ingest(corpus, {"editors.md": "# Editors\n\nTeXstudio is a fork of Texmaker with extra features."})
    leave = search(alice, "年假需提前一周申请", k=2).hits
    passages = tuple(Source(number, hit) for number, hit in enumerate(leave, start=1))
    question = "What is the keyboard shortcut for typesetting in TeXstudio?"
    about = partial(reader.about, question)
    assert evidence.checked(question, passages, scope_for(alice), ["TeXstudio"], (), about)[1:] == (["TeXstudio"], None)
    ingest(corpus, {"keys.md": "# Keys\n\nIn TeXstudio the keyboard shortcut for typesetting is F5."})
    nearby = evidence.checked(question, passages, scope_for(alice), ["TeXstudio"], (), about)[2]
    assert nearby is not None
    assert nearby.hit.document_name == "keys.md"

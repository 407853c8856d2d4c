"""Subtitles cited: `talk.srt` next to `talk.mp4` is the video's words, so a cited cue opens
the video at its moment, not the subtitle file; a subtitle alone is cited with its cue's times.
Real files through the real pipeline, real PostgreSQL + pgvector and the local embedder."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from assistant.answering.answer import attachments, citations
from assistant.answering.types import Source
from assistant.retrieval.search import search
from tests.ingestion import media_files
from tests.ingestion.runs import CountingEmbedder, add, run_it

SAID = "Travel costs fell by ten percent"

pytestmark = pytest.mark.usefixtures("media")


@pytest.mark.django_db
def test_it_opens_the_video_beside_a_cited_subtitle_at_the_cues_moment(client, alice, private_collection, tmp_path):
    embedder = CountingEmbedder()
    subtitles = media_files.make_srt(tmp_path / "review.srt").read_bytes()
    video_bytes = media_files.make_plain_video(tmp_path / "review.mp4", seconds=3).read_bytes()
    video, run = add(private_collection, "talks/review.mp4", video_bytes)
    run_it(run, embedder)
    beside, run = add(private_collection, "talks/review.srt", subtitles)
    run_it(run, embedder)
    alone, run = add(private_collection, "notes/review.srt", subtitles)  # no video in its folder
    run_it(run, embedder)
    # Only the same stem in the same folder is its video.
    add(private_collection, "notes/review.part2.mp4", video_bytes)
    add(private_collection, "review.mp4", video_bytes)

    hits = search(alice, SAID, collection_ids=[private_collection.pk], rerank=False).hits
    cue = {hit.document_id: hit for hit in hits if SAID in hit.text}
    assert set(cue) == {beside.pk, alone.pk}
    sources = [(Source(1, cue[beside.pk]), False), (Source(2, cue[alone.pk]), False)]
    with CaptureQueriesContext(connection) as queries:
        cited = citations(sources, "en")
    assert len(queries) == 3  # sizes, videos and sources: one query each, not one per citation

    assert cited[0]["video_url"] == f"/api/documents/{video.pk}/original/#t=62.5"
    assert cited[1]["video_url"] == f"/api/documents/{alone.pk}/original/#t=62.5"  # as before
    assert (cited[0]["document_id"], cited[0]["place"]) == (beside.pk, "01:02")  # still cites the cue

    with CaptureQueriesContext(connection) as queries:
        attached = attachments([cue[beside.pk], cue[alone.pk]])
    assert len(queries) == 1
    assert [item["kind"] for item in attached] == ["video", "video"]
    assert attached[0]["url"] == f"/api/documents/{video.pk}/original/#t=62.5"
    assert attached[1]["url"] == f"/api/documents/{alone.pk}/original/#t=62.5"
    assert attached[0]["t_start"] == 62.5

    client.force_login(alice)
    response = client.get(attached[0]["url"].split("#")[0])
    assert response.status_code == 200
    assert response["Content-Type"] == "video/mp4"
    assert b"".join(response.streaming_content) == video_bytes


@pytest.mark.django_db
def test_a_failed_video_beside_the_subtitles_is_not_opened(alice, private_collection, tmp_path):
    embedder = CountingEmbedder()
    subtitles, run = add(private_collection, "review.vtt", media_files.make_vtt(tmp_path / "review.vtt").read_bytes())
    run_it(run, embedder)
    broken, run = add(private_collection, "review.mp4", b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 64)
    assert run_it(run, embedder) is None  # it cannot be read, so it would not play either
    broken.refresh_from_db()
    assert broken.status == broken.Status.FAILED
    hits = search(alice, SAID, collection_ids=[private_collection.pk], rerank=False).hits
    cue = next(hit for hit in hits if SAID in hit.text)
    (attached,) = attachments([cue])
    assert attached["url"] == f"/api/documents/{subtitles.pk}/original/#t=62.5"


@pytest.mark.django_db
def test_a_subtitle_citation_carries_its_times_and_opens_the_moment(alice, private_collection, embedder, tmp_path):
    from assistant.answering.answer import attachment, citation
    from assistant.answering.types import Source

    data = media_files.make_srt(tmp_path / "review.srt").read_bytes()
    _document, run = add(private_collection, "review.srt", data)
    run_it(run, embedder)
    results = search(alice, "Travel costs fell by ten percent", collection_ids=[private_collection.pk], rerank=False)
    hit = results.hits[0]
    assert "Travel costs fell" in hit.text
    assert (hit.kind, hit.page_kind) == ("transcript", "video_segment")
    cited = citation(Source(1, hit), "en")
    assert (cited["location"]["t_start"], cited["location"]["t_end"]) == (62.5, 65.0)
    assert cited["place"] == "01:02"
    attached = attachment(hit)
    assert attached["kind"] == "video"
    assert attached["t_start"] == 62.5
    assert attached["url"].endswith("#t=62.5")

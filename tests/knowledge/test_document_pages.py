"""The document page (page thumbnails) and the page view (chunks drawn over the render)."""

from __future__ import annotations

import re

import pytest
from django.core.files.base import ContentFile
from django.urls import reverse

from ingestion import actions
from ingestion.chunking import split_text
from knowledge.models import Chunk, Collection, Document, IndexVersion, Page, PageImage

pytestmark = pytest.mark.usefixtures("media")


def make_version(collection: Collection, number: int = 1, *, active: bool = True) -> IndexVersion:
    status = IndexVersion.Status.ACTIVE if active else IndexVersion.Status.BUILDING
    version = IndexVersion.objects.create(
        collection=collection, number=number, embedder_id="test", dims=3, config_hash="x", status=status
    )
    if active:
        Collection.objects.filter(pk=collection.pk).update(active_version=version)
    return version


def make_document(collection: Collection, pages: int = 2) -> Document:
    document, _run = actions.do_add_document(collection, "report.md", b"# Report\n\ntext", enqueue=False)
    for number in range(1, pages + 1):
        page = Page.objects.create(
            document=document, number=number, kind="pdf_page", content_sha256=f"{number:064d}", width=595, height=842
        )
        page.render.save(f"{number}.png", ContentFile(b"\x89PNG page"))
    Document.objects.filter(pk=document.pk).update(status=Document.Status.READY, page_count=pages)
    return document


def make_chunk(version: IndexVersion, page: Page, ordinal: int, kind: str, bbox: list[float] | None) -> Chunk:
    return Chunk.objects.create(
        index_version=version,
        document=page.document,
        page=page,
        ordinal=ordinal,
        kind=kind,
        text=f"{kind} chunk {ordinal}",
        location={"page": page.number, "bbox": bbox},
        content_sha256=f"{ordinal:064d}",
    )


def test_it_shows_a_lazy_thumbnail_for_every_page(client, alice, private_collection):
    document = make_document(private_collection, pages=3)
    client.force_login(alice)
    html = client.get(reverse("document", args=[document.pk])).content.decode()
    assert html.count('class="page-thumb"') == 3
    assert html.count('loading="lazy"') == 3
    page = document.pages.get(number=2)
    assert f'src="/api/pages/{page.pk}/render/"' in html
    assert f'href="{reverse("document-page", args=[document.pk, 2])}"' in html
    assert "report.md" in html
    assert "Ready" in html


def test_it_says_when_a_document_has_no_pages_yet(client, alice, private_collection):
    document, _run = actions.do_add_document(private_collection, "new.md", b"# New", enqueue=False)
    client.force_login(alice)
    html = client.get(reverse("document", args=[document.pk])).content.decode()
    assert "No pages yet" in html
    assert "page-thumb" not in html


def test_it_lists_a_pages_chunks_with_their_boxes_scaled_to_the_page(client, alice, private_collection):
    document = make_document(private_collection)
    version = make_version(private_collection)
    page = document.pages.get(number=1)
    text = make_chunk(version, page, 0, "text", [59.5, 84.2, 297.5, 421.0])
    table = make_chunk(version, page, 1, "table", [0, 421.0, 595, 842])
    make_chunk(version, page, 2, "text", None)
    client.force_login(alice)
    html = client.get(reverse("document-page", args=[document.pk, 1])).content.decode()
    assert html.count('class="chunk-box') == 2  # the chunk without a bbox has no box
    assert html.count('class="chunk kind-') == 3
    assert f'data-chunk="{text.pk}" data-kind="text"' in html
    assert "--x:10.000%;--y:10.000%;--w:40.000%;--h:40.000%" in html
    assert "--x:0.000%;--y:50.000%;--w:100.000%;--h:50.000%" in html
    assert 'data-bbox="59.5,84.2,297.5,421.0"' in html
    assert f'id="chunk-{table.pk}" class="chunk kind-table' in html
    assert "No position on the page" in html
    assert "is-selected" not in html


def test_it_marks_the_cited_chunk(client, alice, private_collection):
    document = make_document(private_collection)
    version = make_version(private_collection)
    page = document.pages.get(number=1)
    first = make_chunk(version, page, 0, "text", [10, 10, 100, 50])
    cited = make_chunk(version, page, 1, "text", [10, 60, 100, 90])
    client.force_login(alice)
    html = client.get(reverse("document-page", args=[document.pk, 1]) + f"?chunk={cited.pk}").content.decode()
    item = re.search(rf'<li id="chunk-{cited.pk}"[^>]*>', html)
    assert item is not None
    assert "is-selected" in item.group(0)
    assert 'aria-current="true"' in item.group(0)
    assert re.search(rf'class="chunk-box kind-text is-selected"[^>]*data-chunk="{cited.pk}"', html)
    other = re.search(rf'<li id="chunk-{first.pk}"[^>]*>', html)
    assert other is not None
    assert "is-selected" not in other.group(0)
    assert "Cited" in html


# A PDF page's text as PyMuPDF reads it: one line per printed line, a word hyphenated.
PDF_TEXT = (
    "Much of the work of installing a package is done by its maintainer\n"
    "scripts, and such things are taken care of by dpkg itself. A package\n"
    "that needs a user of its own asks for one in its postinst script, and re-\n"
    "moves it again in postrm when the package is purged from the system."
)


def _shown(html: str) -> list[str]:
    """The chunk list's texts, as a reader sees them."""
    texts = re.findall(r'<div class="chunk-text">(.*?)</div>', html, re.S)
    return [re.sub(r"<br>", "\n", text).replace("&#x27;", "'") for text in texts]


def test_it_shows_pdf_chunks_as_running_text_said_once(client, alice, private_collection):
    document = make_document(private_collection)
    Document.objects.filter(pk=document.pk).update(mime="application/pdf")
    version = make_version(private_collection)
    page = document.pages.get(number=1)
    spans = split_text(PDF_TEXT, 200, 50)
    chunks = [make_chunk(version, page, ordinal, "text", None) for ordinal in range(len(spans))]
    for chunk, (start, end) in zip(chunks, spans, strict=True):
        Chunk.objects.filter(pk=chunk.pk).update(text=PDF_TEXT[start:end])
    client.force_login(alice)
    url = reverse("document-page", args=[document.pk, 1])
    shown = _shown(client.get(url).content.decode())
    assert len(shown) == len(spans) == 2
    assert " ".join(shown) == (
        "Much of the work of installing a package is done by its maintainer scripts, and such things are "
        "taken care of by dpkg itself. A package that needs a user of its own asks for one in its postinst "
        "script, and removes it again in postrm when the package is purged from the system."
    )
    # The stored text stays as indexed; a cited chunk is shown whole (reflowed).
    assert Chunk.objects.get(pk=chunks[1].pk).text == PDF_TEXT[spans[1][0] : spans[1][1]]
    cited = _shown(client.get(f"{url}?chunk={chunks[1].pk}").content.decode())[1]
    assert cited.startswith("hings are taken care of by dpkg itself.")
    assert cited.endswith("script, and removes it again in postrm when the package is purged from the system.")


def test_it_says_when_the_cited_chunk_is_not_on_the_page(client, alice, private_collection):
    document = make_document(private_collection)
    version = make_version(private_collection)
    elsewhere = make_chunk(version, document.pages.get(number=2), 0, "text", [1, 1, 2, 2])
    client.force_login(alice)
    url = reverse("document-page", args=[document.pk, 1])
    assert "no longer on this page" in client.get(f"{url}?chunk={elsewhere.pk}").content.decode()
    assert "no longer on this page" in client.get(f"{url}?chunk=nonsense").content.decode()


def test_it_shows_the_active_versions_chunks_or_the_cited_ones_version(client, alice, private_collection):
    document = make_document(private_collection)
    page = document.pages.get(number=1)
    active = make_version(private_collection)
    building = make_version(private_collection, 2, active=False)
    make_chunk(active, page, 0, "text", None)
    newer = make_chunk(building, page, 0, "table", None)
    client.force_login(alice)
    url = reverse("document-page", args=[document.pk, 1])
    html = client.get(url).content.decode()
    assert "kind-text" in html
    assert "kind-table" not in html
    assert "kind-table" in client.get(f"{url}?chunk={newer.pk}").content.decode()


def test_it_shows_the_pages_pictures_and_image_chunks(client, alice, private_collection):
    document = make_document(private_collection)
    version = make_version(private_collection)
    page = document.pages.get(number=1)
    image = PageImage(page=page, sha256="b" * 64, bbox=[100, 100, 300, 200])
    image.file.save("b.png", ContentFile(b"\x89PNG picture"))
    chunk = make_chunk(version, page, 0, "image", [100, 100, 300, 200])
    chunk.location["image"] = "b" * 64
    chunk.save()
    client.force_login(alice)
    html = client.get(reverse("document-page", args=[document.pk, 1])).content.decode()
    assert html.count(f'src="/api/pages/{page.pk}/images/{"b" * 64}/"') == 2  # in the chunk and the pictures
    assert "kind-image" in html


def test_it_has_page_navigation_and_404s_for_a_missing_page(client, alice, private_collection):
    document = make_document(private_collection, pages=3)
    client.force_login(alice)
    html = client.get(reverse("document-page", args=[document.pk, 2])).content.decode()
    assert reverse("document-page", args=[document.pk, 1]) in html
    assert reverse("document-page", args=[document.pk, 3]) in html
    assert "This page has no chunks in the index yet." in html
    assert client.get(reverse("document-page", args=[document.pk, 9])).status_code == 404


def test_it_gives_charlie_404_and_lets_team_viewers_look(client, bob, charlie, team_collection):
    document = make_document(team_collection)
    urls = [reverse("document", args=[document.pk]), reverse("document-page", args=[document.pk, 1])]
    client.force_login(charlie)
    for url in urls:
        response = client.get(url)
        assert response.status_code == 404
        assert "report.md" not in response.content.decode()
    client.force_login(bob)
    for url in urls:
        assert client.get(url).status_code == 200


def test_it_draws_the_boxes_of_a_really_ingested_pdf(client, alice, private_collection, tmp_path):
    import pymupdf

    from common.runs import claim
    from ingestion.models import IngestionRun
    from ingestion.pipeline import ingest_document
    from providers import registry

    pdf = pymupdf.open()
    pdf_page = pdf.new_page(width=600, height=800)
    pdf_page.insert_text((60, 100), "Travel policy", fontsize=22)
    pdf_page.insert_text((60, 140), "Hotels are reimbursed up to 600 a night in Beijing.", fontsize=11)
    document, run = actions.do_add_document(private_collection, "policy.pdf", pdf.tobytes(), enqueue=False)
    assert run is not None
    run = IngestionRun.objects.get(pk=run.pk)
    assert claim(run)
    ingest_document(run, registry.text_embedder())
    client.force_login(alice)
    html = client.get(reverse("document-page", args=[document.pk, 1])).content.decode()
    boxes = re.findall(
        r'class="chunk-box[^"]*"[^>]*style="--x:([\d.]+)%;--y:([\d.]+)%;--w:([\d.]+)%;--h:([\d.]+)%"', html
    )
    assert boxes, html
    x, y, w, h = (float(value) for value in boxes[0])
    assert 5 < x < 15  # 60 of 600 points
    assert 5 < y < 20
    assert 0 < w <= 90
    assert 0 < h < 20
    assert "Hotels are reimbursed" in html

"""A picture's own words (ingestion.pictures): its kind and colours, measured on real pictures
of the public evaluation (eval/manifest-*.jsonl: MATE's nature backgrounds, GPL-2+; KiCad's
Chinese manual, GPL-3+; LXGW WenKai's posters, OFL-1.1), the local picture tagger's labels
with their Chinese names, and the picture chunk the real pipeline indexes and search finds."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from assistant.retrieval.pictures import search_pictures
from assistant.retrieval.scope import scope_for
from assistant.retrieval.search import search
from ingestion import pictures
from ingestion.models import DerivedText
from knowledge.models import Chunk, PageImage
from providers import registry
from providers.base import Tag, Tags
from tests.ingestion.files import ingest

pytestmark = pytest.mark.usefixtures("media")

EVAL = Path(__file__).resolve().parents[2] / "eval" / "files"


def rgb(path: Path) -> np.ndarray:
    with Image.open(path) as opened:
        picture = opened.convert("RGB")
    picture.thumbnail((2000, 2000))
    return np.asarray(picture)


def png(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize("name", ["en/dune.jpg", "en/ladybird.jpg", "en/storm.jpg"])
def test_photos_are_photos(name):
    assert pictures.kind_of(rgb(EVAL / name)) == "photo"


def test_a_screenshot_is_told_from_a_poster_by_its_many_small_lines_of_text():
    screenshot = rgb(EVAL / "zh/board_setup_constraints.png")
    lines = [(40.0 + 22 * n, 54.0 + 22 * n) for n in range(12)]  # 14 px lines, as the OCR reads it
    assert pictures.kind_of(screenshot, lines) == "screenshot"
    assert pictures.kind_of(screenshot) == "graphic"  # without its words it is a diagram
    poster = rgb(EVAL / "zh/zcjb.png")
    assert pictures.kind_of(poster, [(120.0, 220.0), (300.0, 360.0)]) == "graphic"


def test_only_large_pictures_that_are_not_photos_are_read_for_words():
    screenshot = rgb(EVAL / "zh/board_setup_constraints.png")
    assert pictures.holds_text(screenshot)
    assert not pictures.holds_text(screenshot[:150, :150])  # too small to hold a sentence
    assert not pictures.holds_text(rgb(EVAL / "en/dune.jpg"))


def test_a_grey_page_of_few_shades_is_a_scan():
    page = np.full((800, 600, 3), 250, dtype=np.uint8)
    page[100:700:20, 60:540] = 30  # lines of print
    assert pictures.kind_of(page) == "scan"


def test_dominant_colours_are_named_largest_first():
    assert pictures.colours_of(rgb(EVAL / "en/ladybird.jpg"))[0] == "green"
    assert pictures.colours_of(rgb(EVAL / "zh/zcjb.png"))[0] == "red"
    flag = np.zeros((90, 300, 3), dtype=np.uint8)
    flag[:, :100] = (0, 70, 200)
    flag[:, 100:200] = (250, 250, 250)
    flag[:, 200:] = (210, 20, 30)
    assert set(pictures.colours_of(flag)) == {"blue", "white", "red"}


def test_an_objects_colour_is_read_inside_its_box_without_the_background():
    scene = np.full((200, 300, 3), (30, 140, 40), dtype=np.uint8)  # a green field
    scene[60:160, 100:220] = (200, 20, 20)  # a red car on it
    assert pictures.colours_of(scene, (90.0, 50.0, 230.0, 170.0)) == ("red",)
    assert pictures.colours_of(scene)[0] == "green"


@pytest.mark.parametrize(
    "array",
    [
        np.full((16, 16, 3), 128, dtype=np.uint8),  # tiny and all one colour
        np.zeros((1, 500, 3), dtype=np.uint8),  # one row
        np.zeros((500, 1, 3), dtype=np.uint8),  # one column
    ],
)
def test_degenerate_pictures_still_get_a_kind_and_colours(array):
    measured = pictures.measure(array)
    assert measured.kind in pictures.KINDS
    assert all(colour in pictures.COLOURS for colour in measured.colours)


def test_the_description_says_kind_objects_colours_and_date_in_both_languages():
    tags = Tags(
        labels=(Tag("lakeside", "湖畔", "landscape", "风景", 0.4),),
        objects=(Tag("motorcycle", "摩托车", "vehicle", "车辆", 0.9, (1.0, 2.0, 3.0, 4.0)),),
    )
    text = pictures.description(pictures.Measured("photo", ("blue", "yellow")), tags, [("red",)], "2024-05-01T10:30:00")
    english, chinese = text.split("\n")
    assert english == (
        "Photo. Shows: lakeside (landscape), red motorcycle (vehicle). Colours: blue, yellow. Taken 2024-05-01."
    )
    assert chinese == "照片。内容：湖畔（风景）、红色的摩托车（车辆）。颜色：蓝色、黄色。拍摄于 2024-05-01。"


def test_without_tags_a_picture_still_has_its_kind_and_colours():
    text = pictures.description(pictures.Measured("scan", ("white",)), None, [], "")
    assert text == "Scanned page. Colours: white.\n扫描件。颜色：白色。"


# -- the real tagger and the real pipeline --------------------------------------------------


def test_the_local_tagger_names_what_a_real_photo_shows_in_english_and_chinese():
    tags = registry.picture_tagger().tag((EVAL / "en/ladybird.jpg").read_bytes())
    best = tags.labels[0]
    assert (best.en, best.zh, best.family_en, best.family_zh) == ("ladybug", "瓢虫", "insect", "昆虫")
    assert best.score > 0.5


def test_the_local_tagger_finds_objects_with_boxes():
    # A generated street: nothing to find in it is no error; a box is inside the picture.
    scene = rgb(EVAL / "en/storm.jpg")
    tags = registry.picture_tagger().tag(png(scene))
    height, width = scene.shape[:2]
    for tag in tags.objects:
        assert tag.box is not None
        x0, y0, x1, y1 = tag.box
        assert 0 <= x0 < x1 <= width
        assert 0 <= y0 < y1 <= height


@pytest.mark.django_db
def test_a_photo_without_text_is_indexed_as_a_picture_chunk_and_found_in_both_languages(private_collection, alice):
    # Words about photos compete: the picture must win by what it shows.
    guide = "# Photo guide\n\nShow each photo with a caption. 每张照片都要有说明，照片放在第一页。\n"
    ingest(private_collection, "photo-guide.md", guide.encode())
    document = ingest(private_collection, "LadyBird.jpg", (EVAL / "en/ladybird.jpg").read_bytes())
    (chunk,) = Chunk.objects.filter(document=document, kind="picture")
    assert chunk.text.startswith("Photo. Shows: ladybug (insect).")
    assert "瓢虫（昆虫）" in chunk.text
    assert "green" in chunk.text
    assert "绿色" in chunk.text
    assert chunk.location["bbox"] == [0.0, 0.0, 2000.0, 1250.0]
    assert PageImage.objects.filter(page=chunk.page, sha256=chunk.location["image"]).exists()
    assert DerivedText.objects.filter(task="tags").count() == 1
    for question in ("Show me the photo of a ladybug", "有没有瓢虫的照片？"):
        results = search(alice, question, k=5)
        assert results.hits[0].chunk_id == chunk.pk, question
        assert [hit.chunk_id for hit in results.attachments][:1] == [chunk.pk], question


@pytest.mark.django_db
def test_a_photo_leads_the_results_over_many_pages_that_say_every_word_of_the_question(private_collection, alice):
    """Rank fusion alone put the photo below every page that both text channels found: here
    60 chunks, more than each text channel returns, say each word of the question, some that
    the photo's description lacks ("sitting", "stem"); the photo's match puts it first."""
    sections = "".join(
        f"## Part {n}\n\n"
        + f"Step {n}: show the photo of a ladybug sitting on a green stem, then the ladybug sitting on the stem. " * 4
        + "\n\n"
        for n in range(1, 61)
    )
    ingest(private_collection, "ladybug-guide.md", f"# Ladybug photo guide\n\n{sections}".encode())
    for name in ("dune.jpg", "storm.jpg"):
        ingest(private_collection, name, (EVAL / "en" / name).read_bytes())
    document = ingest(private_collection, "photo-07.jpg", (EVAL / "en/ladybird.jpg").read_bytes())
    (chunk,) = Chunk.objects.filter(document=document, kind="picture")
    question = "Show me the photo of a ladybug sitting on a green stem"
    results = search(alice, question, k=4)
    assert results.hits[0].chunk_id == chunk.pk
    assert results.attachments[0].chunk_id == chunk.pk


@pytest.mark.django_db
def test_a_picture_that_matches_only_a_colour_or_nothing_is_not_put_first(private_collection, alice, settings):
    for name in ("dune.jpg", "ladybird.jpg"):
        ingest(private_collection, name, (EVAL / "en" / name).read_bytes())
    scope = scope_for(alice, None)
    ladybug = search_pictures(scope, "Show me the photo of a ladybug on a green leaf", None, "", 10)
    assert max(ladybug.match.values()) >= settings.PICTURE_MATCH
    for question in ("Show me the photo of a giraffe", "Show me a photo of a green giraffe", "找一张绿色长颈鹿的照片"):
        pictures = search_pictures(scope, question, None, "", 10)
        assert pictures.ranked, question  # found by "photo", "green"
        assert max(pictures.match.values()) < settings.PICTURE_MATCH, question


@pytest.mark.django_db
def test_an_everyday_word_finds_the_photo_its_tagger_named_otherwise(private_collection, alice, settings):
    """The tagger calls the kitten "tabby (cat)" and the duck "drake (bird)"; people ask for a
    kitten, a duck, 小猫, 鸭子 (retrieval/picture_words.tsv)."""
    kitten = ingest(private_collection, "photo-02.jpg", (EVAL / "en/photo-02.jpg").read_bytes())
    duck = ingest(private_collection, "photo-07.jpg", (EVAL / "en/photo-07.jpg").read_bytes())
    ingest(private_collection, "ladybird.jpg", (EVAL / "en/ladybird.jpg").read_bytes())
    scope = scope_for(alice, None)
    for question, document in (
        ("Find the photo of a kitten", kitten),
        ("有没有小猫的照片？", kitten),
        ("Find the photo of a duck standing on the grass", duck),
        ("找一张鸭子的照片", duck),
    ):
        pictures = search_pictures(scope, question, None, "", 10)
        best = max(pictures.match, key=lambda pk: pictures.match[pk])
        assert pictures.match[best] >= settings.PICTURE_MATCH, question
        assert Chunk.objects.get(pk=best).document_id == document.pk, question


@pytest.mark.django_db
def test_with_tagging_off_a_photo_is_still_described_by_kind_and_colour(private_collection, settings):
    from dataclasses import replace

    roles = dict(settings.MODEL_ROLES)
    roles["tagging"] = replace(roles["tagging"], provider="none")
    settings.MODEL_ROLES = roles
    registry.reset()
    try:
        document = ingest(private_collection, "zcjb.png", (EVAL / "zh/zcjb.png").read_bytes())
    finally:
        registry.reset()
    (chunk,) = Chunk.objects.filter(document=document, kind="picture")
    assert "Shows:" not in chunk.text
    assert "红色" in chunk.text
    assert not DerivedText.objects.filter(task="tags").exists()


@pytest.mark.django_db
def test_a_screenshot_inside_a_page_with_text_is_read_by_the_ocr(private_collection):
    """The numbers of KiCad's constraints dialog exist only in the screenshot's pixels; the page
    around it has a text layer, which used to keep the OCR away."""
    import pymupdf

    pdf = pymupdf.open()
    page = pdf.new_page(width=595, height=842)
    page.insert_text((72, 80), "Board setup: the design rules are shown below.", fontsize=12)
    page.insert_image(pymupdf.Rect(40, 120, 555, 370), filename=str(EVAL / "zh/board_setup_constraints.png"))
    document = ingest(private_collection, "kicad.pdf", pdf.tobytes())
    (image,) = Chunk.objects.filter(document=document, kind="image")
    assert "0.4" in image.text
    assert "过孔" in image.text
    (picture,) = Chunk.objects.filter(document=document, kind="picture")
    assert picture.text.startswith("Screenshot.")
    assert "截图" in picture.text


def _awkward(kind: str) -> bytes:
    """Pictures that are hard to describe, made with Pillow: each must still get its words."""
    buffer = io.BytesIO()
    if kind == "one-colour.png":
        Image.new("RGB", (640, 480), (128, 128, 128)).save(buffer, format="PNG")
    elif kind == "tiny.png":
        Image.new("RGB", (16, 16), (200, 30, 30)).save(buffer, format="PNG")
    elif kind == "animated.gif":
        frames = [Image.new("P", (120, 90), colour) for colour in (1, 2, 3)]
        frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    elif kind == "cmyk.jpg":
        Image.new("CMYK", (300, 200), (0, 200, 200, 0)).save(buffer, format="JPEG")
    elif kind == "sixteen-bit.png":
        ramp = (np.arange(320 * 240, dtype=np.uint32).reshape(240, 320) % 65535).astype(np.uint16)
        Image.frombytes("I;16", (320, 240), ramp.tobytes()).save(buffer, format="PNG")
    elif kind == "rotated.jpg":
        exif = Image.Exif()
        exif[0x0112] = 6  # Orientation: rotate 90° clockwise to show
        Image.new("RGB", (400, 200), (30, 60, 200)).save(buffer, format="JPEG", exif=exif)
    return buffer.getvalue()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "colour"),
    [
        ("one-colour.png", "grey"),
        ("tiny.png", "red"),
        ("animated.gif", None),
        ("cmyk.jpg", "red"),
        ("sixteen-bit.png", None),
        ("rotated.jpg", "blue"),
    ],
)
def test_awkward_pictures_each_get_a_description(private_collection, name, colour):
    document = ingest(private_collection, name, _awkward(name))
    (chunk,) = Chunk.objects.filter(document=document, kind="picture")
    english, chinese = chunk.text.split("\n")
    assert english.split(".")[0].lower() in ("photo", "screenshot", "scanned page", "chart or diagram"), chunk.text
    assert chinese.split("。")[0] in ("照片", "截图", "扫描件", "图表或示意图"), chunk.text
    if colour is not None:
        assert f"Colours: {colour}" in english, chunk.text

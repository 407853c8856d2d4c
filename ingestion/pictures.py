"""What a picture is and what it shows, in words people search with (English and Chinese):
its kind (photo, screenshot, scanned page, chart or diagram), its dominant colours and its
objects' colours, the tags of the picture tagger (providers.local.tagger), and the
date its camera recorded. The words become the picture's own chunk (kind "picture"), so a
photo without any text in it is found by "the photo of a motorcycle" or "红色的车".

The kind and the colours are measured here, without a model, on the picture's pixels:

- kind: photos have few runs of identical neighbouring pixels (sensor noise), screenshots,
  charts and scans many; a scan is grey with few distinct shades; a screenshot has many small
  lines of text (the OCR's), a chart or diagram few or large ones;
- colours: each pixel is named by its hue, saturation and value (black, white, grey, brown,
  red, orange, yellow, green, blue, purple, pink); a colour covering enough of the picture (or
  of an object's box, its middle part, without the background at its edges) is named.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from providers.base import Tags

SIDE = 160  # colours are counted on a picture this size: enough for shares, fast
MIN_COLOUR_SHARE = 0.12  # of the picture (or of an object's box)
MAX_COLOURS = 3
FLAT_PHOTO = 0.45  # below this share of pixels equal to their right neighbour: a photo
SURE_LABEL_SCORE = 0.5  # a class of a picture that is not a photo is said from this score
# A picture inside a page is read by the OCR from this size (its shorter side, in pixels).
OCR_MIN_SIDE = 200
SCAN_SATURATION, SCAN_SHADES = 0.03, 32
SCREEN_LINES, SCREEN_LINE_HEIGHT = 6, 0.04  # OCR lines, and their median height per picture height
KINDS = {
    "photo": ("photo", "照片"),
    "screenshot": ("screenshot", "截图"),
    "scan": ("scanned page", "扫描件"),
    "graphic": ("chart or diagram", "图表或示意图"),
}
COLOURS = {
    "black": "黑色",
    "white": "白色",
    "grey": "灰色",
    "brown": "棕色",
    "red": "红色",
    "orange": "橙色",
    "yellow": "黄色",
    "green": "绿色",
    "blue": "蓝色",
    "purple": "紫色",
    "pink": "粉色",
}


@dataclass(frozen=True)
class Measured:
    kind: str  # a key of KINDS
    colours: tuple[str, ...]  # keys of COLOURS, the largest first


def measure(rgb: Any, text_lines: Sequence[tuple[float, float]] = (), flat: float | None = None) -> Measured:
    """The kind and the dominant colours of a picture (an RGB array); `text_lines`: the
    (top, bottom) in pixels of each line the OCR read in it; `flat`: its flat_share, where
    it was measured already."""
    return Measured(kind_of(rgb, text_lines, flat), colours_of(rgb))


def holds_text(rgb: Any, flat: float | None = None) -> bool:
    """Whether a picture inside a page may hold words worth reading: large enough, and not a
    photo (screenshots, charts and scans are flat; the words of a photo are a sign or a shirt)."""
    return min(rgb.shape[:2]) >= OCR_MIN_SIDE and (flat_share(rgb) if flat is None else flat) >= FLAT_PHOTO


def kind_of(rgb: Any, text_lines: Sequence[tuple[float, float]] = (), flat: float | None = None) -> str:
    import numpy as np

    if (flat_share(rgb) if flat is None else flat) < FLAT_PHOTO:
        return "photo"
    small = _resized(rgb)
    saturation = float(_hsv(small)[..., 1].mean())
    shades = len(np.unique((small >> 3).reshape(-1, 3), axis=0))
    if saturation < SCAN_SATURATION and shades <= SCAN_SHADES:
        return "scan"
    heights = sorted(bottom - top for top, bottom in text_lines)
    if len(heights) >= SCREEN_LINES and heights[len(heights) // 2] < SCREEN_LINE_HEIGHT * rgb.shape[0]:
        return "screenshot"
    return "graphic"


def colours_of(rgb: Any, box: tuple[float, float, float, float] | None = None) -> tuple[str, ...]:
    """The colours covering at least MIN_COLOUR_SHARE of the picture, or of the middle of an
    object's box (its edges are mostly background), the largest first."""
    if box is not None:
        x0, y0, x1, y1 = box
        dx, dy = (x1 - x0) * 0.2, (y1 - y0) * 0.2
        rgb = rgb[
            int(y0 + dy) : max(int(y1 - dy), int(y0 + dy) + 1), int(x0 + dx) : max(int(x1 - dx), int(x0 + dx) + 1)
        ]
    if rgb.size == 0:
        return ()
    names = _named(_hsv(_resized(rgb)))
    counts = Counter(names.ravel().tolist())
    total = sum(counts.values())
    wanted = [name for name, count in counts.most_common(MAX_COLOURS) if count / total >= MIN_COLOUR_SHARE]
    return tuple(COLOUR_NAMES[index] for index in wanted)


COLOUR_NAMES = tuple(COLOURS)


def flat_share(rgb: Any) -> float:
    """The share of pixels equal to their right neighbour (a full pass over a large picture:
    measured once and handed to holds_text and measure)."""
    return float((rgb[:, 1:] == rgb[:, :-1]).all(axis=2).mean()) if rgb.shape[1] > 1 else 1.0


def _named(hsv: Any) -> Any:
    """Each pixel's colour as an index into COLOUR_NAMES."""
    import numpy as np

    hue, saturation, value = hsv[..., 0] * 360, hsv[..., 1], hsv[..., 2]
    names = np.full(hue.shape, COLOUR_NAMES.index("grey"))
    coloured = saturation >= 0.2
    bands = [(15, "red"), (40, "orange"), (70, "yellow"), (165, "green"), (255, "blue"), (290, "purple"), (340, "pink")]
    lower = 0.0
    for upper, name in bands:
        names[coloured & (hue >= lower) & (hue < upper)] = COLOUR_NAMES.index(name)
        lower = upper
    names[coloured & (hue >= 340)] = COLOUR_NAMES.index("red")
    warm = coloured & ((hue < 40) | (hue >= 340)) & (value < 0.55)
    names[warm] = COLOUR_NAMES.index("brown")
    names[~coloured & (value > 0.85)] = COLOUR_NAMES.index("white")
    names[value < 0.18] = COLOUR_NAMES.index("black")
    return names


def _resized(rgb: Any) -> Any:
    import cv2

    height, width = rgb.shape[:2]
    scale = SIDE / max(height, width)
    if scale >= 1:
        return rgb
    size = (max(int(width * scale), 1), max(int(height * scale), 1))
    return cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)


def _hsv(rgb: Any) -> Any:
    """Hue, saturation and value, each 0-1."""
    import cv2
    import numpy as np

    hsv = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2HSV_FULL).astype(np.float32)
    return hsv / 255.0


def trusted(tags: Tags, kind: str) -> Tags:
    """The tags worth saying: all of a photo's; of a screenshot, chart or scan only the
    classes the classifier is sure of ("web site", "crossword puzzle"), none of its objects (the
    detector sees kites and balls in diagrams)."""
    if kind == "photo":
        return tags
    return Tags(labels=tuple(tag for tag in tags.labels if tag.score >= SURE_LABEL_SCORE), objects=())


def description(measured: Measured, tags: Tags | None, object_colours: Sequence[tuple[str, ...]], taken: str) -> str:
    """The picture's words, English then Chinese, e.g. "Photo. Shows: motorcycle (vehicle).
    Colours: red, black. 照片。内容：摩托车（车辆）。颜色：红色、黑色。" """
    kind_en, kind_zh = KINDS[measured.kind]
    english, chinese = [f"{kind_en.capitalize()}."], [f"{kind_zh}。"]
    if tags is not None:
        none: tuple[str, ...] = ()
        shown = [(tag.en, tag.zh, tag.family_en, tag.family_zh, none) for tag in tags.labels]
        shown += [
            (tag.en, tag.zh, tag.family_en, tag.family_zh, colours)
            for tag, colours in zip(tags.objects, object_colours, strict=True)
        ]
        seen: set[str] = set()
        en_parts, zh_parts = [], []
        for en, zh, family_en, family_zh, colours in shown:
            coloured_en = f"{' and '.join(colours)} {en}" if colours else en
            coloured_zh = f"{'和'.join(COLOURS[colour] for colour in colours)}的{zh}" if colours else zh
            if coloured_en in seen:
                continue
            seen.add(coloured_en)
            en_parts.append(coloured_en if family_en in ("other", en) else f"{coloured_en} ({family_en})")
            zh_parts.append(coloured_zh if family_zh in ("其他", zh) else f"{coloured_zh}（{family_zh}）")
        if en_parts:
            english.append(f"Shows: {', '.join(en_parts)}.")
            chinese.append(f"内容：{'、'.join(zh_parts)}。")
    if measured.colours:
        english.append(f"Colours: {', '.join(measured.colours)}.")
        chinese.append(f"颜色：{'、'.join(COLOURS[colour] for colour in measured.colours)}。")
    if taken:
        english.append(f"Taken {taken[:10]}.")
        chinese.append(f"拍摄于 {taken[:10]}。")
    return " ".join(english) + "\n" + "".join(chinese)

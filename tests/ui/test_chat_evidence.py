"""The chat shows each stage of an answer as it happens and the evidence as soon as it is
found, in a real browser (Chromium through Playwright) against real daphne.

How the events reach the page: Playwright routes the page's /ws/chat/ (`page.route_web_socket`).

- The first test connects that route to the real server: the question goes to the real
  consumer and the real pipeline, whose events reach the page as they are, except that the
  test writes the `stage` and `evidence` events and the `done` event's `mode` and
  `decisions` (the server's own, where it sends them, are dropped). Its evidence is a real
  passage of the indexed PDF, opened in the real citation dialog on the page's real render.
  The question is one the portal declines before any model work (as in
  test_chat_decline.py), so the local chat model is never loaded.
- The second test's socket is scripted entirely (no server behind it): a multi-step answer
  that is not declined, on a phone's width in Chinese.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from knowledge.models import Chunk
from tests.assistant.chat_files import files, ingest_files
from tests.assistant.test_chat_page import make_conversation
from tests.ui.test_browser import log_in_as_alice

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("media")]

QUOTE = "Employees get ten days of paid annual leave per year."
DECISIONS = [
    {
        "stage": "retrieve",
        "outcome": "found",
        "reason": "passages above the threshold",
        "figures": {"passages": 3, "score": 0.73125},
        "final": False,
    },
    {"stage": "anchors", "outcome": "decline", "reason": "near_miss", "figures": {"missing": "2031"}, "final": True},
]


def stage(name: str, text: str, **figures: int) -> dict[str, Any]:
    return {"type": "stage", "stage": name, "text": text, "figures": figures}


class Between:
    """The page's /ws/chat/, connected to the real server: the server's events go on to the
    page, with the test's stages and evidence added. At the first event after the search
    (`retrieval`, or whatever comes first in its place) the evidence is sent and the server's
    later events are held until `release()`, so that the page can be read before any answer
    text. The server's own `stage` and `evidence` events are dropped: the test says which the
    page sees."""

    AFTER_SEARCH = {"retrieval", "answer.delta", "answer.replace", "closest", "citations", "attachments", "done"}

    def __init__(self, evidence: dict[str, Any]) -> None:
        self.evidence = evidence
        self.page_side: Any = None
        self.seen: list[str] = []  # the server's event types, in order
        self.searched = False  # the search is over: the evidence was sent
        self.held: list[dict[str, Any]] | None = None

    def route(self, socket: Any) -> None:
        self.page_side = socket
        server = socket.connect_to_server()
        server.on_message(self.from_server)

    def send(self, event: dict[str, Any]) -> None:
        if event["type"] == "done":
            event = event | {"mode": "evidence", "decisions": DECISIONS}
        self.page_side.send(json.dumps(event))

    def from_server(self, message: str | bytes) -> None:
        event = json.loads(message)
        self.seen.append(event["type"])
        if event["type"] in ("stage", "evidence"):
            return
        if self.held is not None:
            self.held.append(event)
        elif event["type"] in self.AFTER_SEARCH and not self.searched:
            self.searched = True
            self.held = []
            if event["type"] == "retrieval":
                self.send(event)
            else:
                self.held.append(event)
            self.send(stage("found", "Found 3 passages", count=3))
            self.send(stage("read", "Reading the passages…"))
            self.send(self.evidence)
        else:
            self.send(event)
            if event["type"] == "started":
                self.send(stage("search", "Searching 1 collection…", count=1))

    def release(self) -> None:
        """The server's events held since the evidence, and from now on those that follow."""
        held, self.held = self.held or [], None
        for event in held:
            self.send(event)


@pytest.fixture
def indexed(private_collection):
    """Alice's collection with the answering tests' files, indexed before the browser starts
    (its event loop would refuse the ingestion's synchronous Redis events)."""
    ingest_files(private_collection, files())
    return private_collection


def evidence_in(collection) -> dict[str, Any]:
    """An `evidence` event for the sentence of the policy PDF that holds QUOTE, its citation
    as the pipeline's `citations` event gives it."""
    chunk = Chunk.objects.select_related("page", "document").get(document__collection=collection, text__contains=QUOTE)
    page = chunk.page
    citation = {
        "n": 1,
        "inferred": False,
        "chunk_id": chunk.pk,
        "document_id": chunk.document_id,
        "collection_id": collection.pk,
        "file": chunk.document.name,
        "path": chunk.document.rel_path,
        "page": page.number,
        "page_id": page.pk,
        "page_kind": page.kind,
        "place": f"page {page.number}",
        "location": chunk.location,
        "page_width": page.width,
        "page_height": page.height,
        "text": chunk.text,
        "quote": QUOTE,
        "quote_bbox": None,
        "thumbnail_url": f"/api/pages/{page.pk}/render/",
    }
    return {"type": "evidence", "quote": QUOTE, "confidence": 0.4137, "citation": citation, "step": None}


def test_the_stages_and_the_evidence_show_before_the_answer(indexed, live_web, page, alice, tmp_path):
    between = Between(evidence_in(indexed))
    base = log_in_as_alice(page, live_web)
    page.route_web_socket(re.compile(r"/ws/chat/$"), between.route)
    page.goto(f"{base}/chat/")
    page.wait_for_selector("#send:not([disabled])")
    page.check(f'input[name=collections][value="{indexed.pk}"]')
    page.fill("#question", "How many days of annual leave do we get in 2031?")
    page.click("#send")

    turn = page.locator(".answer-turn").last
    card = turn.locator(".evidence .evidence-card")
    card.wait_for(timeout=120_000)
    # The latest stage instead of "Working on it…", and the evidence before any answer text.
    assert turn.locator(".status").inner_text() == "Reading the passages…"
    assert turn.locator(".answer").inner_text().strip() == ""
    assert card.locator("blockquote mark").inner_text() == QUOTE
    assert card.locator(".confidence").inner_text() == "confidence 0.41"
    assert card.locator(".evidence-label").inner_text() == "Evidence"
    source = card.locator("button.evidence-source")
    assert source.inner_text() == "policy.pdf · page 2"
    page.screenshot(path=str(tmp_path / "evidence.png"), full_page=True)

    # The card's passage opens in the citation dialog: the quote marked, on the page's render.
    source.click()
    dialog = page.locator("dialog#citation-dialog")
    dialog.locator(".citation-snippet mark").wait_for()
    assert dialog.locator("#citation-title").inner_text() == "[1] policy.pdf · page 2"  # one line, no repeat
    assert not dialog.locator(".citation-where").is_visible()  # its path is its name
    assert dialog.locator(".citation-snippet mark").inner_text() == QUOTE
    dialog.locator(".page-view img").wait_for(state="visible")
    assert dialog.locator(".page-view .bbox").is_visible()  # the passage's lines, boxed
    assert dialog.locator("a.citation-open").get_attribute("href") == (
        f"/documents/{between.evidence['citation']['document_id']}/pages/2/"
        f"?chunk={between.evidence['citation']['chunk_id']}"
    )
    dialog.locator("button.close").click()
    assert not dialog.is_visible()

    # The rest of the answer: the portal declines (2031 is in no passage), so the evidence goes
    # and the closest passages stay; how it was found stays under the answer.
    between.release()
    page.wait_for_selector("#send:not([disabled])", timeout=120_000)
    assert turn.locator(".answer").inner_text().startswith("The documents do not contain the answer.")
    assert turn.locator(".closest").is_visible()
    assert card.count() == 0
    assert turn.locator(".evidence").is_hidden()
    assert turn.locator(".status").inner_text() == ""
    found = turn.locator("details.found")
    assert found.is_visible()
    found.locator("summary").click()
    stages = found.locator(".stages li").all_inner_texts()
    assert [re.sub(r" \d+\.\d s$", "", text) for text in stages] == [
        "Searching 1 collection…",
        "Found 3 passages",
        "Reading the passages…",
    ], stages
    assert all(re.search(r" \d+\.\d s$", text) for text in stages), stages
    assert found.locator(".found-mode").inner_text() == "How the answer was made: quoting the evidence"
    assert found.locator(".decisions li").all_inner_texts() == [
        "search — found — passages above the threshold (passages=3, score=0.73)",
        "anchors — decline — the question names something the passages do not hold (missing=2031)",
    ]
    assert found.locator(".decisions li.final").count() == 1
    assert "retrieval" in between.seen  # the real pipeline's search came through
    page.screenshot(path=str(tmp_path / "declined.png"), full_page=True)


class Scripted:
    """A /ws/chat/ with no server behind it: on `ask` it sends the first part of a
    multi-step answer (up to its evidence); `finish()` sends the rest."""

    def __init__(self) -> None:
        self.socket: Any = None
        self.asked: list[dict[str, Any]] = []

    def route(self, socket: Any) -> None:
        self.socket = socket
        socket.on_message(self.from_page)

    def send(self, *events: dict[str, Any]) -> None:
        for event in events:
            self.socket.send(json.dumps(event))

    def from_page(self, message: str | bytes) -> None:
        asked = json.loads(message)
        if asked.get("type") != "ask":
            return
        self.asked.append(asked)
        self.send(
            {"type": "started", "conversation": 987654, "message": 1, "collections": [{"id": 1, "name": "产品资料"}]},
            stage("search", "正在检索 1 个知识库…", count=1),
            {"type": "strategy", "strategy": "multi_step", "reason": "比较两个产品", "by": "rules"},
            {"type": "plan", "steps": ["Falcon 保修期", "Heron 保修期"], "by": "rules"},
            {"type": "step.start", "step": 1, "query": "Falcon 保修期"},
            {"type": "step.result", "step": 1, "hits": []},
            {"type": "step.start", "step": 2, "query": "Heron 保修期"},
            {"type": "step.result", "step": 2, "hits": []},
            stage("found", "找到 2 个段落", count=2),
            # Out of order: the page shows them by step.
            scripted_evidence(2, "Heron 交换机的保修期为五年。", 0.64, "heron.md"),
            scripted_evidence(1, "Falcon 路由器的保修期为两年。" * 6, 0.91, "falcon.md"),
            stage("write", "正在撰写…"),
        )

    def finish(self) -> None:
        self.send(
            {"type": "answer.delta", "text": "Falcon 保修两年 [1]，Heron 保修五年 [2]。"},
            stage("verify", "正在核对答案…"),
            {"type": "citations", "citations": [scripted_citation(1, "falcon.md"), scripted_citation(2, "heron.md")]},
            {"type": "attachments", "attachments": []},
            {
                "type": "done",
                "cancelled": False,
                "conversation": 987654,
                "message": 2,
                "timings": {},
                "strategy": "multi_step",
                "abstain": False,
                "mode": "phrase",
                "decisions": [
                    {"stage": "read", "outcome": "found", "reason": "", "figures": {"score": 0.9}, "final": False},
                    {"stage": "decide", "outcome": "answer", "reason": "", "figures": {}, "final": True},
                ],
            },
        )


def scripted_citation(n: int, file: str) -> dict[str, Any]:
    text = {
        "falcon.md": "Falcon 路由器的保修期为两年。Falcon 支持 Wi-Fi 6。",
        "heron.md": "Heron 交换机的保修期为五年。",
    }
    return {"n": n, "file": file, "path": file, "place": "第 1 节", "page": 1, "text": text[file], "location": {}}


def scripted_evidence(step: int, quote: str, confidence: float, file: str) -> dict[str, Any]:
    citation = scripted_citation(step, file) | {"quote": quote}
    return {"type": "evidence", "quote": quote, "confidence": confidence, "citation": citation, "step": step}


def test_a_multi_step_answers_evidence_on_a_phone_in_chinese(live_web, page, alice, tmp_path):
    scripted = Scripted()
    base = log_in_as_alice(page, live_web)
    page.select_option("#language", "zh-hans")
    page.wait_for_selector("text=新建知识库")
    page.set_viewport_size({"width": 375, "height": 740})
    page.route_web_socket(re.compile(r"/ws/chat/$"), scripted.route)
    page.goto(f"{base}/chat/")
    page.wait_for_selector("#send:not([disabled])")
    assert page.locator(".answer-turn").count() == 0
    page.fill("#question", "Falcon 和 Heron 的保修期各是多久？")
    page.click("#send")

    turn = page.locator(".answer-turn").last
    cards = turn.locator(".evidence .evidence-card")
    cards.nth(1).wait_for()
    assert turn.locator(".status").inner_text() == "正在撰写…"
    assert turn.locator(".answer").inner_text().strip() == ""
    assert cards.locator(".evidence-label").all_inner_texts() == ["第 1 步的依据", "第 2 步的依据"]
    assert cards.locator(".confidence").all_inner_texts() == ["置信度 0.91", "置信度 0.64"]
    assert cards.nth(1).locator("mark").inner_text() == "Heron 交换机的保修期为五年。"
    # On a phone the long quote wraps: nothing is wider than the screen.
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 375
    for index in range(2):
        box = cards.nth(index).bounding_box()
        assert box is not None
        assert box["x"] >= 0
        assert box["x"] + box["width"] <= 375
    page.screenshot(path=str(tmp_path / "evidence-phone.png"), full_page=True)

    cards.nth(1).locator("button.evidence-source").click()
    dialog = page.locator("dialog#citation-dialog")
    dialog.locator(".citation-snippet mark").wait_for()
    assert dialog.locator("#citation-title").inner_text().startswith("[2] heron.md")
    assert dialog.locator(".citation-snippet mark").inner_text() == "Heron 交换机的保修期为五年。"
    dialog.locator("button.close").click()

    # The answer's text: the evidence stays, smaller, above it.
    scripted.finish()
    page.wait_for_selector("#send:not([disabled])")
    assert turn.locator(".answer").inner_text().startswith("Falcon 保修两年")
    assert cards.count() == 2
    assert "compact" in (turn.locator(".evidence").get_attribute("class") or "")
    assert turn.locator(".status").inner_text() == ""
    found = turn.locator("details.found")
    found.locator("summary").click()
    stages = found.locator(".stages li").all_inner_texts()
    assert [re.sub(r" \d+\.\d 秒$", "", text) for text in stages] == [
        "正在检索 1 个知识库…",
        "找到 2 个段落",
        "正在撰写…",
        "正在核对答案…",
    ], stages
    assert found.locator(".found-mode").inner_text() == "作答方式：由模型根据依据组织语言"
    assert found.locator(".decisions li").all_inner_texts() == ["阅读 — 找到 (score=0.90)", "判定 — 作答"]
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 375
    page.screenshot(path=str(tmp_path / "answer-phone.png"), full_page=True)
    assert scripted.asked[0]["question"] == "Falcon 和 Heron 的保修期各是多久？"


def test_a_stored_answer_shows_its_evidence_and_how_it_was_found(live_web, page, alice):
    citation = scripted_citation(1, "falcon.md") | {"quote": "Falcon 路由器的保修期为两年。"}
    evidence = {"quote": "Falcon 路由器的保修期为两年。", "confidence": 0.875, "citation": citation, "step": None}
    answered = make_conversation(
        alice,
        "Falcon 保修多久？",
        "两年 [1]。",
        citations=[citation],
        evidence=[evidence],
        decisions=[{"stage": "decide", "outcome": "answer", "reason": "evidence", "figures": {}, "final": True}],
        mode="evidence",
    )
    closest = {
        "document_id": 5,
        "file": "heron.md",
        "page": 1,
        "place": "section 1",
        "chunk_id": 9,
        "url": "/documents/5/pages/1/?chunk=9",
    }
    declined = make_conversation(
        alice,
        "Falcon 2031?",
        "The documents do not contain the answer.",
        abstain=True,
        evidence=[evidence],
        closest=[closest],
        decisions=[{"stage": "anchors", "outcome": "decline", "reason": "near_miss", "figures": {}, "final": True}],
        mode="evidence",
    )
    base = log_in_as_alice(page, live_web)
    page.goto(f"{base}/chat/{answered.pk}/")
    turn = page.locator(".answer-turn")
    turn.locator(".evidence-card").wait_for()
    assert turn.locator(".evidence-card mark").inner_text() == "Falcon 路由器的保修期为两年。"
    assert turn.locator(".confidence").inner_text() == "confidence 0.88"
    assert "compact" in (turn.locator(".evidence").get_attribute("class") or "")
    turn.locator("button.evidence-source").click()
    page.locator("dialog#citation-dialog .citation-snippet mark").wait_for()
    page.locator("dialog#citation-dialog button.close").click()
    turn.locator("details.found summary").click()
    assert turn.locator(".decisions li").all_inner_texts() == ["decision — answer — evidence"]

    page.goto(f"{base}/chat/{declined.pk}/")
    turn = page.locator(".answer-turn")
    turn.locator(".closest a").wait_for()
    assert turn.locator(".closest a").get_attribute("href") == "/documents/5/pages/1/?chunk=9"
    assert turn.locator(".evidence-card").count() == 0
    turn.locator("details.found summary").click()
    assert turn.locator(".decisions li").inner_text() == (
        "anchors — decline — the question names something the passages do not hold"
    )

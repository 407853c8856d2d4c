"""Reranking offline, with no cross-encoder available: the local chat model judges whether
each passage answers the question; the score is P(yes) - P(no) of its first token, in [-1, 1].
About 0.5-1 s a passage on 2 cores, so it is off unless PROVIDER_RERANK=local."""

from __future__ import annotations

from collections.abc import Sequence

from providers import registry
from providers.base import ChatMessage
from providers.config import RoleConfig
from providers.local.chat import LocalChatModel

JUDGE = {
    "en": (
        "You judge search results. Answer only yes or no.",
        "Question: {query}\nPassage: {passage}\nDoes the passage help answer the question?",
    ),
    "zh": (
        "你负责判断检索结果是否相关。只回答 yes 或 no。",
        "问题：{query}\n段落：{passage}\n这个段落有助于回答问题吗？",
    ),
}
MAX_PASSAGE_CHARS = 2000


class ChatJudgeReranker:
    def __init__(self, config: RoleConfig) -> None:
        self.config = config
        self.model_id = f"local:{config.model}"
        chat = registry.role_config("chat")
        # Share the chat model's weights and context when chat is local too (one copy in memory).
        self._judge: LocalChatModel = (
            registry.get("chat") if chat.provider == "local" else LocalChatModel(registry.role_config("chat"))
        )

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        system, user = JUDGE["zh" if _is_chinese(query) else "en"]
        return [
            self._judge.yes_minus_no(
                [
                    ChatMessage("system", system),
                    ChatMessage("user", user.format(query=query, passage=passage[:MAX_PASSAGE_CHARS])),
                ]
            )
            for passage in passages
        ]


def _is_chinese(text: str) -> bool:
    return any("\u4e00" <= char <= "\u9fff" for char in text)

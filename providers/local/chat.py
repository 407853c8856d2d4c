"""Chat offline: Qwen2.5-Coder 1.5B Instruct (Q4_K_M GGUF) through llama-cpp-python.

The weights come joined and SHA-256-verified from their chunk packages (model_files.py).
One llama.cpp context per process, used by one call at a time (it is not thread-safe).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

from django.conf import settings

from providers.base import ChatMessage, ChatResult, ProviderError, json_mode_args, message_dicts
from providers.config import RoleConfig
from providers.local.model_files import QWEN_CHAT_1_5B, ensure_model

# Prompt + answer budget; more costs memory (the KV cache) on a small machine.
CONTEXT_TOKENS = 4096
# Model states kept after each call, so that the next prompt with the same beginning (the
# router's instructions, the answer's) is not read again: about 5 s less per question on
# 2 cores. Least recently used states go first.
PROMPT_CACHE_BYTES = 512 << 20


class LocalChatModel:
    def __init__(self, config: RoleConfig) -> None:
        self.config = config
        self.model_id = f"local:{config.model}"
        self._llm: Any = None
        self._yes_no: tuple[list[int], list[int]] | None = None
        self._lock = threading.Lock()
        self.last_read = 0  # prompt tokens the last one-pass call read (the rest was cached)

    def _load(self) -> Any:
        if self._llm is None:
            try:
                from llama_cpp import Llama
            except ImportError as exc:
                raise ProviderError(
                    "chat",
                    "local",
                    f"llama-cpp-python is not installed ({exc}): "
                    "run scripts/bootstrap.sh (it builds it once, then pip caches the wheel)",
                ) from exc
            path = ensure_model(QWEN_CHAT_1_5B, settings.MODELS_DIR)
            try:
                self._llm = Llama(
                    model_path=str(path),
                    n_ctx=CONTEXT_TOKENS,
                    n_threads=self.config.threads,
                    n_batch=256,
                    verbose=False,
                )
            except ValueError as exc:  # llama.cpp refused the file
                raise ProviderError("chat", "local", f"cannot load {path}: {exc}") from exc
            from llama_cpp import LlamaRAMCache

            self._llm.set_cache(LlamaRAMCache(capacity_bytes=PROMPT_CACHE_BYTES))
        return self._llm

    def _too_long(self, messages: Sequence[ChatMessage], max_tokens: int) -> None:
        # A rough bound (chars / 2 ≥ tokens for zh and en) to fail clearly instead of inside llama.cpp.
        size = sum(len(m.content) for m in messages) // 2 + max_tokens
        if size > CONTEXT_TOKENS * 2:
            raise ProviderError("chat", "local", f"the prompt is too long for a {CONTEXT_TOKENS}-token context")

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_mode: bool = False,
        max_tokens: int = 512,
        temperature: float = 0.2,
    ) -> ChatResult:
        self._too_long(messages, max_tokens)
        extra = json_mode_args(json_mode)
        with self._lock:
            try:
                response = self._load().create_chat_completion(
                    messages=message_dicts(messages),
                    max_tokens=max_tokens,
                    temperature=temperature,
                    **extra,
                )
            except ValueError as exc:  # e.g. the prompt exceeds the context
                raise ProviderError("chat", "local", str(exc)) from exc
        usage = response.get("usage") or {}
        return ChatResult(
            text=response["choices"][0]["message"].get("content") or "",
            model=self.model_id,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
        )

    def stream(
        self, messages: Sequence[ChatMessage], *, max_tokens: int = 512, temperature: float = 0.2
    ) -> Iterator[str]:
        self._too_long(messages, max_tokens)
        with self._lock:
            chunks = self._load().create_chat_completion(
                messages=message_dicts(messages),
                max_tokens=max_tokens,
                temperature=temperature,
                stream=True,
            )
            for chunk in chunks:
                delta = chunk["choices"][0].get("delta", {}).get("content")
                if delta:
                    yield delta

    def yes_minus_no(self, messages: Sequence[ChatMessage]) -> float:
        """P(yes) - P(no) for the assistant's first token: a judge's confidence, from one forward
        pass instead of a generation. Used by the local reranker and the answer's judge."""
        with self._lock:
            probabilities = self._first_token(messages)
            yes, no = self._yes_no_tokens(self._load())
        return float(probabilities[yes].sum() - probabilities[no].sum())

    def choice(self, messages: Sequence[ChatMessage], options: Sequence[str]) -> list[float]:
        """Constrained decoding of one token: the probability of each option (a short word
        or number whose first token is its own, such as "0".."9") as the assistant's first
        token, renormalised over the options only, so the model can answer nothing else.
        One forward pass over the prompt, nothing generated."""
        with self._lock:
            probabilities = self._first_token(messages)
            llm = self._load()
            tokens = [llm.tokenize(option.encode(), add_bos=False)[0] for option in options]
        chosen = [float(probabilities[token]) for token in tokens]
        total = sum(chosen) or 1.0
        return [value / total for value in chosen]

    def _first_token(self, messages: Sequence[ChatMessage]) -> Any:
        """The distribution of the assistant's first token after `messages` (the lock held).

        The tokens it shares with what the model read last are not read again, and what it
        reads stays in the context: an answer whose prompt starts as the judge's did (the
        same passages and question) reads only the rest."""
        import llama_cpp
        import numpy as np

        prompt = "".join(f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in messages)
        prompt += "<|im_start|>assistant\n"  # Qwen's ChatML: the answer starts here
        llm = self._load()
        tokens = llm.tokenize(prompt.encode(), add_bos=False, special=True)
        if len(tokens) >= CONTEXT_TOKENS:
            raise ProviderError("rerank", "local", f"the passage is too long for a {CONTEXT_TOKENS}-token context")
        from llama_cpp import Llama

        shared = Llama.longest_token_prefix(llm.input_ids[: llm.n_tokens].tolist(), tokens)
        llm.n_tokens = min(shared, len(tokens) - 1)  # at least one token read: its logits are the answer
        llm.eval(tokens[llm.n_tokens :])
        self.last_read = len(tokens) - min(shared, len(tokens) - 1)
        # Only the last position's logits exist without logits_all (llm.scores stays zero).
        pointer = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
        logits = np.ctypeslib.as_array(pointer, shape=(llm.n_vocab(),)).astype(np.float64)
        probabilities = np.exp(logits - logits.max())
        return probabilities / probabilities.sum()

    def _yes_no_tokens(self, llm: Any) -> tuple[list[int], list[int]]:
        if self._yes_no is None:

            def first_tokens(*words: str) -> list[int]:
                return [llm.tokenize(word.encode(), add_bos=False)[0] for word in words]

            self._yes_no = (first_tokens("yes", "Yes", "YES"), first_tokens("no", "No", "NO"))
        return self._yes_no

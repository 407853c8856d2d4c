"""A local HTTP server that speaks the providers' wire formats (OpenAI-style chat with SSE
streaming, embeddings, /rerank), records what it was sent, and answers from a script.
Remote backends are tested against it; nothing reaches the internet."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict → JSON; list → SSE events (dicts as JSON, str raw); str → raw text
    delay: float = 0.0
    done: bool = True  # end an SSE stream with OpenAI's "data: [DONE]" (DashScope sends none)
    pace: float = 0.0  # seconds between SSE events


@dataclass
class Wire:
    """Replies are taken in order per path; the last one repeats."""

    replies: dict[str, list[Reply]] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)
    url: str = ""
    # Answers from the request instead of a queue when set: (path, body) -> Reply.
    responder: Callable[[str, Any], Reply] | None = None

    def on(self, path: str, *replies: Reply) -> None:
        self.replies[path] = list(replies)

    def take(self, path: str) -> Reply:
        queue = self.replies.get(path) or [Reply(404, {"error": {"message": f"no route {path}"}})]
        return queue.pop(0) if len(queue) > 1 else queue[0]

    def bodies(self, path: str) -> list[Any]:
        return [body for p, _h, body in self.requests if p == path]


def _handler(wire: Wire) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                body = raw.decode(errors="replace")
            wire.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            reply = wire.responder(self.path, body) if wire.responder else wire.take(self.path)
            if reply.delay:
                time.sleep(reply.delay)
            if isinstance(reply.body, list):
                self._sse(reply)
            else:
                data = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                self._send(reply.status, "application/json", data.encode())

        def _send(self, status: int, content_type: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _sse(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for event in reply.body:
                data = event if isinstance(event, str) else json.dumps(event)
                self.wfile.write(f"data: {data}\n\n".encode())
                self.wfile.flush()
                if reply.pace:
                    time.sleep(reply.pace)
            if reply.done:
                self.wfile.write(b"data: [DONE]\n\n")

    return Handler


@contextmanager
def serve() -> Iterator[Wire]:
    wire = Wire()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(wire))
    server.daemon_threads = True
    wire.url = f"http://127.0.0.1:{server.server_address[1]}"
    # Polled every 20 ms, not 0.5 s: shutdown() waits for the loop to notice.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield wire
    finally:
        server.shutdown()
        server.server_close()


def completion(text: str, model: str = "m") -> dict[str, Any]:
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }


def chunks(*pieces: str, model: str = "m") -> list[dict[str, Any]]:
    return [
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
        }
        for piece in pieces
    ]


def embeddings(*vectors: list[float]) -> dict[str, Any]:
    return {
        "object": "list",
        "model": "e",
        "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
        "usage": {"prompt_tokens": 1, "total_tokens": 1},
    }

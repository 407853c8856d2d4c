"""The local chat model served over HTTP with OpenAI's chat-completions API, so that the
portal's OpenAI-compatible provider (PROVIDER_CHAT=openai) can be measured end to end
against the same weights: the remote-style answer path (whole passages, the model writes,
the verifier checks) on a machine with no network.

    .venv/bin/python bench/local_openai_server.py --port 8765 &
    PROVIDER_CHAT=openai BASE_URL_CHAT=http://127.0.0.1:8765/v1 API_KEY_CHAT=local \\
        .venv/bin/python manage.py evaluate eval/questions.jsonl --collection <id> --answers

POST /v1/chat/completions takes `messages`, `max_tokens`, `temperature` and `stream`; it
answers as OpenAI does (a JSON completion, or Server-Sent Events ending with [DONE]).
Nothing else; one request at a time (one llama.cpp context).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("MEM0_TELEMETRY", "False")
# This process is the local model, whatever the portal is told to use.
os.environ["PROVIDER_CHAT"] = "local"

import django  # noqa: E402

django.setup()

from providers import registry  # noqa: E402
from providers.base import ChatMessage  # noqa: E402

LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/chat/completions":
            self.send_error(404)
            return
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        messages = [ChatMessage(item["role"], _text(item["content"])) for item in body.get("messages", [])]
        max_tokens = int(body.get("max_tokens") or 512)
        temperature = float(body.get("temperature") or 0.2)
        model = registry.chat_model()
        created = int(time.time())
        with LOCK:
            if body.get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for delta in model.stream(messages, max_tokens=max_tokens, temperature=temperature):
                    chunk = {"id": "local", "object": "chat.completion.chunk", "created": created, "model": "local"}
                    chunk["choices"] = [{"index": 0, "delta": {"content": delta}, "finish_reason": None}]
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                return
            result = model.complete(messages, max_tokens=max_tokens, temperature=temperature)
        reply: dict[str, Any] = {
            "id": "local",
            "object": "chat.completion",
            "created": created,
            "model": "local",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": result.text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _text(content: Any) -> str:
    if isinstance(content, list):  # [{"type": "text", "text": ...}]
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"serving the local chat model on http://127.0.0.1:{args.port}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

"""Answering: route the question, retrieve, plan when needed, and stream a cited answer.

    for event in answer(Ask(user, "年假可以累积吗？", conversation, (3,))): ...

Events are plain dicts with a "type" (the websocket protocol: assistant/consumers.py); the
websocket consumer, the HTTP/SSE view and `manage.py chat` all read the same stream.
"""

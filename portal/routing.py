from django.urls import path

from assistant.consumers import ChatConsumer
from knowledge.consumers import CollectionEventsConsumer
from operations.instrumentation import websockets

# Each consumer's connections counted for /metrics (operations/instrumentation.py).
websocket_urlpatterns = [
    path("ws/chat/", websockets(ChatConsumer.as_asgi(), "chat")),
    path("ws/collections/<int:collection_id>/", websockets(CollectionEventsConsumer.as_asgi(), "collection_events")),
]

from django.urls import path

from assistant.consumers import ChatConsumer
from knowledge.consumers import CollectionEventsConsumer

websocket_urlpatterns = [
    path("ws/chat/", ChatConsumer.as_asgi()),
    path("ws/collections/<int:collection_id>/", CollectionEventsConsumer.as_asgi()),
]

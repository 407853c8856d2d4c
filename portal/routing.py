from django.urls import path

from knowledge.consumers import CollectionEventsConsumer

websocket_urlpatterns = [
    path("ws/collections/<int:collection_id>/", CollectionEventsConsumer.as_asgi()),
]

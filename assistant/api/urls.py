from django.urls import include, path
from rest_framework.routers import SimpleRouter

from assistant.api import ask, conversations, memory, search

router = SimpleRouter()
router.register("conversations", conversations.ConversationViewSet, basename="conversation")
router.register("memories", memory.MemoryViewSet, basename="memory")

urlpatterns = [
    path("search/", search.SearchView.as_view(), name="search"),
    path("ask/", ask.AskView.as_view(), name="ask"),
    path("", include(router.urls)),
]

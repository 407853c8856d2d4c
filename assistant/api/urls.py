from django.urls import include, path
from rest_framework.routers import SimpleRouter

from assistant.api import ask, conversations, search

router = SimpleRouter()
router.register("conversations", conversations.ConversationViewSet, basename="conversation")

urlpatterns = [
    path("search/", search.SearchView.as_view(), name="search"),
    path("ask/", ask.AskView.as_view(), name="ask"),
    path("", include(router.urls)),
]

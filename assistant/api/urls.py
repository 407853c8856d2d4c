from django.urls import path

from assistant.api import search

urlpatterns = [
    path("search/", search.SearchView.as_view(), name="search"),
]

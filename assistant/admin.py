"""Admin: the test search on a collection's page (every stage's score for a query). The
collection admin is knowledge's with ingestion's actions (ingestion/admin.py), registered
again here with the search added: neither app may import the assistant."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.translation import gettext as _

from assistant.retrieval.scope import scope_of
from assistant.retrieval.search import search
from ingestion import admin as ingestion_admin
from knowledge.models import Collection

admin.site.unregister(Collection)


@admin.register(Collection)
class CollectionAdmin(ingestion_admin.CollectionAdmin):
    change_form_template = "admin/knowledge/collection/change_form.html"  # links to the search

    def get_urls(self) -> list[Any]:
        urls = [
            path(
                "<path:object_id>/search/",
                self.admin_site.admin_view(self.test_search),
                name="knowledge_collection_search",
            )
        ]
        return urls + super().get_urls()

    def test_search(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Try a query on one collection and see every stage's score: why a result is there."""
        collection = self.get_object(request, object_id)
        query = request.GET.get("q", "").strip()
        results = None
        if query:
            scope = scope_of(Collection.objects.filter(pk=collection.pk))
            results = search(request.user, query, k=20, rerank=request.GET.get("rerank") == "on", scope=scope)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": collection,
            "title": _("Test search in “%(name)s”") % {"name": collection.name},
            "query": query,
            "results": results,
            "rerank": request.GET.get("rerank") == "on",
        }
        return TemplateResponse(request, "admin/knowledge/collection/test_search.html", context)

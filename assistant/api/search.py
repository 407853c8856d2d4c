"""POST /api/search/: the retrieval pipeline for other systems, with every stage's scores."""

from __future__ import annotations

from dataclasses import asdict

from django.http import Http404
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from assistant.access import access_conversation
from assistant.answering import router
from assistant.answering.session import history_of
from assistant.api.serializers import SearchRequestSerializer, SearchResponseSerializer
from assistant.retrieval.search import search
from assistant.retrieval.types import CHANNELS
from knowledge.access import access_collection
from knowledge.api.schema import NOT_FOUND


class SearchView(APIView):
    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)
    reads_only = True  # a read-only API token may search (knowledge.api.authentication)

    @extend_schema(request=SearchRequestSerializer, responses={200: SearchResponseSerializer, 404: NOT_FOUND})
    def post(self, request: Request) -> Response:
        form = SearchRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        named = data.get("collections")
        if named is not None:
            for collection_id in named:
                access_collection(request.user, collection_id)  # 404 for what the caller cannot see
        query = data["query"]
        if data.get("conversation") is not None:
            query = resolved(request, data["conversation"], query)
        results = search(
            request.user,
            query,
            collection_ids=named,
            k=data["k"],
            channels=data.get("channels") or CHANNELS,
            rerank=data["rerank"],
        )
        body = asdict(results)
        for hit in (*body["hits"], *body["attachments"]):
            hit["render_url"] = f"/api/pages/{hit['page_id']}/render/"
        return Response(SearchResponseSerializer(body).data)


def resolved(request: Request, conversation_id: int, question: str) -> str:
    """The question as the answer pipeline searches a follow-up with no model: the earlier
    question and this one together, when it leans on an earlier turn (router.by_rules).
    Another user's conversation is not found."""
    try:
        conversation = access_conversation(request.user, conversation_id)
    except Http404:
        raise NotFound(_("That conversation does not exist.")) from None
    history = history_of(conversation)
    if history and router.by_rules(question, history).strategy == "rewrite":
        return router.with_topic(question, history)
    return question

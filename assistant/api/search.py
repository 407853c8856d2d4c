"""POST /api/search/: the retrieval pipeline for other systems, with every stage's scores."""

from __future__ import annotations

from dataclasses import asdict

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from assistant.retrieval.search import search
from assistant.retrieval.types import CHANNELS, Hit
from knowledge.access import access_collection
from knowledge.api.schema import NOT_FOUND


class SearchRequestSerializer(serializers.Serializer[dict[str, object]]):
    query = serializers.CharField(max_length=2000, trim_whitespace=True)
    collections = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        required=False,
        max_length=100,
        help_text="Collection ids to search; all the caller may see when left out.",
    )
    k = serializers.IntegerField(min_value=1, max_value=50, default=10)
    channels = serializers.ListField(
        child=serializers.ChoiceField(choices=list(CHANNELS)), required=False, allow_empty=False
    )
    rerank = serializers.BooleanField(default=True)


class StageSerializer(serializers.Serializer[object]):
    score = serializers.FloatField()
    rank = serializers.IntegerField()


class HitSerializer(serializers.Serializer[Hit]):
    chunk_id = serializers.IntegerField()
    collection_id = serializers.IntegerField()
    document_id = serializers.IntegerField()
    document_name = serializers.CharField()
    rel_path = serializers.CharField()
    page_id = serializers.IntegerField()
    page_number = serializers.IntegerField()
    page_kind = serializers.CharField()
    kind = serializers.CharField()
    text = serializers.CharField()
    location = serializers.DictField()
    channels = serializers.DictField(child=StageSerializer())
    fused = serializers.FloatField()
    rerank = serializers.FloatField(allow_null=True)
    weight = serializers.FloatField()
    score = serializers.FloatField()
    render_url = serializers.CharField()


class SearchResponseSerializer(serializers.Serializer[object]):
    query = serializers.CharField()
    hits = HitSerializer(many=True)
    attachments = HitSerializer(many=True)
    media_intent = serializers.BooleanField()
    reranker = serializers.CharField()
    timings = serializers.DictField(child=serializers.FloatField())


class SearchView(APIView):
    @extend_schema(request=SearchRequestSerializer, responses={200: SearchResponseSerializer, 404: NOT_FOUND})
    def post(self, request: Request) -> Response:
        form = SearchRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        named = data.get("collections")
        if named is not None:
            for collection_id in named:
                access_collection(request.user, collection_id)  # 404 for what the caller cannot see
        results = search(
            request.user,
            data["query"],
            collection_ids=named,
            k=data["k"],
            channels=data.get("channels") or CHANNELS,
            rerank=data["rerank"],
        )
        body = asdict(results)
        for hit in (*body["hits"], *body["attachments"]):
            hit["render_url"] = f"/api/pages/{hit['page_id']}/render/"
        return Response(SearchResponseSerializer(body).data)

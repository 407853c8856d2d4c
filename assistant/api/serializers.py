"""The API's serializers: what /api/search/, /api/ask/, /api/conversations/ and
/api/memories/ accept and return (their views are search.py, ask.py, conversations.py and
memory.py beside this module)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from assistant.answering.types import MODES
from assistant.memory.service import MemoryItem
from assistant.models import Conversation, Message
from assistant.retrieval.types import CHANNELS, Hit

# Search (search.py)


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
    conversation = serializers.IntegerField(
        min_value=1,
        required=False,
        help_text="A conversation of the caller's: a follow-up question that leans on an earlier turn "
        "(a pronoun, 'what about…') is searched with the earlier question, as /api/ask/ searches it; "
        "the response's `query` says what was searched.",
    )


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


# Answering (ask.py)


class AskRequestSerializer(serializers.Serializer[dict[str, Any]]):
    question = serializers.CharField(max_length=2000)
    collections = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        required=False,
        allow_null=True,
        max_length=100,
        help_text="Collection ids to answer from; all the caller may see when left out or empty.",
    )
    conversation = serializers.IntegerField(
        min_value=1, required=False, allow_null=True, help_text="Continue this conversation (its history is used)."
    )


class CitationOriginSerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField(help_text="The source's name.")
    kind = serializers.CharField(help_text="folder, git, webdav or s3.")
    path = serializers.CharField(help_text="The file's path in the source.")
    url = serializers.CharField(allow_blank=True, help_text="The file at its source; empty when it has no page.")


class CitationSerializer(serializers.Serializer[dict[str, Any]]):
    n = serializers.IntegerField()
    file = serializers.CharField()
    path = serializers.CharField()
    page = serializers.IntegerField()
    place = serializers.CharField()
    chunk_id = serializers.IntegerField()
    document_id = serializers.IntegerField()
    page_id = serializers.IntegerField()
    location = serializers.DictField()
    score = serializers.FloatField()
    snippet = serializers.CharField()
    text = serializers.CharField(help_text="The cited passage (up to 4,000 characters).")
    quote = serializers.CharField(
        allow_blank=True, help_text="The span of the passage the answer rests on, as it stands in `text`."
    )
    quote_bbox = serializers.ListField(
        child=serializers.FloatField(),
        allow_null=True,
        help_text="The quote's box on the page, [x0, y0, x1, y1] in the units of `location.bbox`; null when unplaced.",
    )
    thumbnail_url = serializers.CharField()
    video_url = serializers.CharField(allow_null=True, help_text="A timed passage: the video at its moment (`#t=`).")
    origin = CitationOriginSerializer(
        allow_null=True, required=False, help_text="Where a source brought the file from; null for uploads."
    )


class AttachmentSerializer(serializers.Serializer[dict[str, Any]]):
    kind = serializers.ChoiceField(choices=["image", "video"])
    file = serializers.CharField()
    url = serializers.CharField()
    page = serializers.IntegerField()
    chunk_id = serializers.IntegerField()
    thumbnail_url = serializers.CharField()
    t_start = serializers.FloatField(allow_null=True)


class ClosestSerializer(serializers.Serializer[dict[str, Any]]):
    document_id = serializers.IntegerField()
    collection_id = serializers.IntegerField()
    file = serializers.CharField()
    page = serializers.IntegerField()
    page_id = serializers.IntegerField()
    place = serializers.CharField(help_text="Where, as a person says it: page 3, slide 2, 01:05.")
    chunk_id = serializers.IntegerField()
    snippet = serializers.CharField()
    url = serializers.CharField(help_text="The page in the portal, with this passage marked (`?chunk=`).")


class EvidenceSerializer(serializers.Serializer[dict[str, Any]]):
    quote = serializers.CharField(help_text="The sentence(s), table row or line that answer, as the passage has them.")
    confidence = serializers.FloatField(help_text="How sure the evidence reader is, 0 to 1.")
    citation = CitationSerializer()
    step = serializers.IntegerField(allow_null=True, help_text="The plan step it answers, in a multi-step answer.")


class DecisionSerializer(serializers.Serializer[dict[str, Any]]):
    stage = serializers.CharField(
        help_text="retrieve, cells, read, anchors, decide, choose, phrase, write, verify or attach."
    )
    outcome = serializers.CharField(help_text="What the stage decided: found, held, answer, decline, chose 2, ...")
    reason = serializers.CharField(
        help_text="Why; for a decline one of near_miss, low_evidence, unmentioned, unknown, no_measure, model_none, "
        "judge, no_passages, model_refused."
    )
    figures = serializers.DictField(help_text="The figures it decided on (scores, counts).")
    final = serializers.BooleanField(help_text="Whether this decision settled the answer (the last final one does).")


class AskResponseSerializer(serializers.Serializer[dict[str, Any]]):
    answer = serializers.CharField()
    abstain = serializers.BooleanField()
    strategy = serializers.ChoiceField(choices=["direct", "rewrite", "multi_step"])
    rewrite = serializers.CharField(allow_null=True)
    plan = serializers.ListField(child=serializers.CharField())
    citations = CitationSerializer(many=True)
    closest = ClosestSerializer(
        many=True,
        help_text="When the portal declined (`abstain`): the passages nearest to an answer, as links to their "
        "pages; not citations, they do not answer. Empty otherwise.",
    )
    attachments = AttachmentSerializer(many=True)
    evidence = EvidenceSerializer(
        many=True,
        help_text="The evidence shown before any model work: the reader's best quote with its citation "
        "(one per step in a multi-step answer). Empty for a near miss.",
    )
    mode = serializers.ChoiceField(
        choices=list(MODES),
        help_text="How the answer was made (PORTAL_ANSWER_MODE).",
    )
    decisions = DecisionSerializer(many=True, help_text="Every decision the answer made, in order.")
    checks = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="What the portal changed in the model's answer after checking it against the passages: "
        "`retried` (a refusal asked again on the best passage), `removed` (sentences with a value found in no "
        "passage), `quoted` (the passage's own words added), `steps_added` (plan steps the summary left out).",
    )
    judge = serializers.FloatField(
        allow_null=True,
        help_text="P(yes) - P(no) of the local model judging whether the passages state the answer "
        "(PORTAL_ANSWER_JUDGE); null when not judged.",
    )
    timings = serializers.DictField(child=serializers.FloatField())
    conversation = serializers.IntegerField()
    message = serializers.IntegerField(allow_null=True)
    error = serializers.DictField(allow_null=True)


# Conversations (conversations.py)


class MessageSerializer(serializers.ModelSerializer[Message]):
    class Meta:
        model = Message
        fields = [
            "id", "role", "content", "strategy", "rewrite", "plan", "citations", "attachments", "timings",
            "abstain", "mode", "decisions", "evidence", "closest", "error", "searched", "models_used",
            "created_at",
        ]  # fmt: skip


class ConversationSerializer(serializers.ModelSerializer[Conversation]):
    class Meta:
        model = Conversation
        fields = ["id", "title", "collections", "created_at", "updated_at"]


class ConversationDetailSerializer(ConversationSerializer):
    messages = MessageSerializer(many=True, read_only=True)

    class Meta(ConversationSerializer.Meta):
        fields = [*ConversationSerializer.Meta.fields, "messages"]


# Memory (memory.py)


class MemorySerializer(serializers.Serializer[MemoryItem]):
    id = serializers.UUIDField(read_only=True)
    text = serializers.CharField(max_length=2000, help_text="The memory, one sentence or a question with its answer.")
    created_at = serializers.CharField(read_only=True, allow_null=True)
    updated_at = serializers.CharField(read_only=True, allow_null=True)
    score = serializers.FloatField(read_only=True, allow_null=True, help_text="Relevance to `q` (searches only).")
    conversation = serializers.IntegerField(read_only=True, allow_null=True, help_text="Where it was learned.")
    message = serializers.IntegerField(read_only=True, allow_null=True)
    inferred = serializers.BooleanField(
        read_only=True, help_text="False: a question and its answer kept as they were (the model could not extract)."
    )


class MemoryChangeSerializer(serializers.Serializer[dict[str, Any]]):
    event = serializers.CharField(help_text="ADD or UPDATE.")
    old = serializers.CharField(allow_null=True)
    new = serializers.CharField(allow_null=True)
    created_at = serializers.CharField(allow_null=True)
    updated_at = serializers.CharField(allow_null=True)


class ExportSerializer(serializers.Serializer[dict[str, Any]]):
    user = serializers.UUIDField()
    exported_at = serializers.CharField()
    count = serializers.IntegerField()
    memories = serializers.ListField(child=serializers.DictField())


class DeletedSerializer(serializers.Serializer[dict[str, Any]]):
    deleted = serializers.IntegerField()

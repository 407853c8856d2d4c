"""The serializers of ingestion's API writes (documents.py): a video link, and the results of
an upload and of adding a link."""

from __future__ import annotations

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers


class VideoLinkSerializer(serializers.Serializer[None]):
    # Lengths and the URL's scheme are checked by actions.check_video_link, with its messages.
    url = serializers.CharField(trim_whitespace=True)
    title = serializers.CharField(trim_whitespace=True)
    description = serializers.CharField(required=False, allow_blank=True, default="")


UPLOAD_RESULT = inline_serializer(
    "UploadResult",
    {
        "name": serializers.CharField(),
        "document": serializers.IntegerField(allow_null=True),
        "run": serializers.IntegerField(allow_null=True),
        "unchanged": serializers.BooleanField(),
        "error": serializers.CharField(allow_blank=True),
    },
    many=True,
)

LINK_RESULT = inline_serializer(
    "LinkResult",
    {
        "name": serializers.CharField(),
        "document": serializers.IntegerField(),
        "run": serializers.IntegerField(allow_null=True),
        "unchanged": serializers.BooleanField(),
        "error": serializers.CharField(allow_blank=True),
    },
)

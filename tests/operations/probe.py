"""Run in a portal instance's own process (its settings from the environment): prints, as
JSON, what a backup must carry over, read through the portal's own routes where a user
would see it. The round-trip test runs it against the restored instance and compares with
the original's.

    python tests/operations/probe.py USERNAME QUERY [QUERY ...]"""

from __future__ import annotations

import hashlib
import json
import os
import sys


def main(username: str, queries: list[str]) -> dict[str, object]:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    django.setup()
    from django.conf import settings
    from rest_framework.test import APIClient

    from assistant.models import Conversation, MemoryHistory
    from audit.models import Entry
    from knowledge.models import Collection, Document, IndexVersion, Page
    from operations.backup import counts
    from portal.models import User
    from quality.models import Feedback, GoldenQuestion
    from sources.models import Source

    settings.ALLOWED_HOSTS = ["*"]
    user = User.objects.get(username=username)
    client = APIClient()
    client.force_login(user)
    searches = []
    for query in queries:
        response = client.post("/api/search/", {"query": query, "rerank": False}, format="json")
        assert response.status_code == 200, (query, response.status_code, response.content[:300])
        searches.append([(hit["document_id"], hit["page_number"], hit["chunk_id"]) for hit in response.json()["hits"]])
    renders = {}
    for page in Page.objects.filter(render__gt="").order_by("pk"):
        response = client.get(f"/api/pages/{page.pk}/render/")
        body = b"".join(response.streaming_content) if response.streaming else response.content  # type: ignore[attr-defined]
        renders[page.pk] = [response.status_code, hashlib.sha256(body).hexdigest()]
    sources = {}
    for source in Source.objects.order_by("pk"):
        try:
            credentials = source.credentials()
            sources[source.name] = [credentials.username, credentials.password]
        except Exception as exc:  # reported, compared by the test
            sources[source.name] = [type(exc).__name__, ""]
    return {
        "counts": counts(),
        "documents": {str(pk): name for pk, name in Document.objects.values_list("pk", "name")},
        "searches": searches,
        "renders": renders,
        "sources": sources,
        "memory_history": sorted(
            (row.memory_id, row.event, row.new_memory or "") for row in MemoryHistory.objects.all()
        ),
        "conversations": sorted(
            (conversation.title, [message.content for message in conversation.messages.order_by("pk")])
            for conversation in Conversation.objects.all()
        ),
        "versions": sorted((v.collection_id, v.number, v.status) for v in IndexVersion.objects.all()),
        "active_versions": sorted(Collection.objects.values_list("pk", "active_version__number")),
        "golden": sorted(GoldenQuestion.objects.values_list("question", flat=True)),
        "feedback": Feedback.objects.count(),
        "audit": sorted(Entry.objects.values_list("action", flat=True)),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2:]), sort_keys=True, default=str))

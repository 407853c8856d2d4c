import base64
from unittest import mock

import pytest

from tests.assistant.chat_files import files, ingest_files
from tests.assistant.wire import serve

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
"""A 1×1 PNG, the smallest picture a model backend can be sent."""


@pytest.fixture
def wire():
    """A local server speaking the model providers' wire formats; retries do not wait. Modules
    that script a whole conversation define their own."""
    with serve() as server, mock.patch("providers.retry.pause"):
        yield server


@pytest.fixture
def policies(db, private_collection):
    """Alice's collection with the answering tests' files indexed in it."""
    ingest_files(private_collection, files())
    private_collection.refresh_from_db()
    return private_collection

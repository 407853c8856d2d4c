import pytest

from tests.assistant.chat_files import files, ingest_files


@pytest.fixture
def policies(db, private_collection):
    """Alice's collection with the answering tests' files indexed in it."""
    ingest_files(private_collection, files())
    private_collection.refresh_from_db()
    return private_collection

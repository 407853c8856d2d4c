import pytest

from tests.ingestion.runs import CountingEmbedder


@pytest.fixture
def embedder() -> CountingEmbedder:
    """The real local embedder, counting the texts it embeds."""
    return CountingEmbedder()

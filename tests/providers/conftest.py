import base64
from unittest import mock

import pytest

from tests.providers.wire import serve

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

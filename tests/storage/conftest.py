"""The storage tests' S3 server: moto in a subprocess with authentication enforced, one for
the session (tests/sources/servers.py); each test has a bucket of its own."""

from tests.sources.servers import s3_server_fixture  # noqa: F401

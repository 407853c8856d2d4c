"""S3Remote against a real moto S3 server in a subprocess, with authentication enforced
(tests.sources.servers): only the IAM user's access key gets in."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from sources.remotes.base import Credentials, Entry, FileError, Location, RemoteError
from sources.remotes.s3 import S3Remote
from tests.sources.servers import S3Server, s3_server_fixture  # noqa: F401 (the s3_server fixture)
from tests.stack import free_port


def bucket_name() -> str:
    return f"test-{uuid4().hex[:12]}"


def open_s3(server: S3Server, bucket: str, credentials: Credentials | None = None, **location: Any) -> S3Remote:
    if credentials is None:
        credentials = Credentials(server.access_key, server.secret_key)
    return S3Remote(
        Location(kind="s3", url=server.endpoint_url, bucket=bucket, region=server.region, **location), credentials
    )


def listing(remote: S3Remote) -> dict[str, Entry]:
    try:
        return {entry.path: entry for entry in remote.entries()}
    finally:
        remote.close()


def test_lists_and_fetches_under_a_prefix(s3_server: S3Server, tmp_path: Path):
    bucket = bucket_name()
    big = bytes(range(256)) * 20_000  # 5 MB
    s3_server.make_bucket(
        bucket,
        {
            "outside.md": "no",
            "docs-other/x.md": "not under docs/",
            "docs/": "",  # a folder marker
            "docs/a.md": "alpha",
            "docs/empty.txt": "",
            "docs/guide/deep/Ünïcode name #1.md": "deep",
            "docs/media/big.bin": big,
        },
    )
    template = "https://{path}.example.com/view?branch={branch}"
    remote = open_s3(s3_server, bucket, prefix="/docs/", link_template=template)
    entries = {entry.path: entry for entry in remote.entries()}
    assert set(entries) == {"a.md", "empty.txt", "guide/deep/Ünïcode name #1.md", "media/big.bin"}
    assert entries["empty.txt"].size == 0
    assert entries["media/big.bin"].size == len(big)
    assert entries["a.md"].signal == hashlib.md5(b"alpha", usedforsecurity=False).hexdigest()  # the ETag, unquoted

    remote.fetch(entries["media/big.bin"], tmp_path / "big")
    assert (tmp_path / "big").read_bytes() == big
    remote.fetch(entries["guide/deep/Ünïcode name #1.md"], tmp_path / "deep")
    assert (tmp_path / "deep").read_text() == "deep"
    remote.fetch(entries["empty.txt"], tmp_path / "empty")
    assert (tmp_path / "empty").read_bytes() == b""
    # {path} is the whole key (prefix included), percent-encoded.
    assert remote.link("guide/deep/x y.md") == "https://docs/guide/deep/x%20y.md.example.com/view?branch="
    assert open_s3(s3_server, bucket).link("a.md") == ""
    remote.close()

    everything = listing(open_s3(s3_server, bucket))
    assert "outside.md" in everything
    assert "docs/a.md" in everything


def test_the_etag_changes_with_the_content_only(s3_server: S3Server):
    bucket = bucket_name()
    client = s3_server.make_bucket(bucket, {"a.md": "alpha", "b.md": "bravo"})
    first = listing(open_s3(s3_server, bucket))
    client.put_object(Bucket=bucket, Key="a.md", Body=b"alpha, edited")
    client.put_object(Bucket=bucket, Key="c.md", Body=b"new")
    second = listing(open_s3(s3_server, bucket))
    assert second["a.md"].signal != first["a.md"].signal
    assert second["b.md"].signal == first["b.md"].signal
    assert set(second) == {"a.md", "b.md", "c.md"}


def test_a_missing_bucket(s3_server: S3Server):
    with pytest.raises(RemoteError) as error:
        listing(open_s3(s3_server, "no-such-bucket-here"))
    host = s3_server.endpoint_url.removeprefix("http://").split(":")[0]
    assert str(error.value) == f"The bucket “no-such-bucket-here” does not exist at {host}."


def test_a_key_or_bucket_deleted_after_the_listing(s3_server: S3Server, tmp_path: Path):
    bucket = bucket_name()
    client = s3_server.make_bucket(bucket, {"a.md": "a", "b.md": "b"})
    remote = open_s3(s3_server, bucket)
    entries = {entry.path: entry for entry in remote.entries()}

    client.delete_object(Bucket=bucket, Key="a.md")
    with pytest.raises(FileError, match="deleted from the bucket since the listing"):
        remote.fetch(entries["a.md"], tmp_path / "a")

    s3_server.delete_bucket(bucket)
    with pytest.raises(RemoteError, match=f"The bucket “{bucket}” does not exist"):
        remote.fetch(entries["b.md"], tmp_path / "b")
    remote.close()


def test_wrong_credentials_are_refused_without_the_secret(s3_server: S3Server):
    bucket = bucket_name()
    s3_server.make_bucket(bucket, {"a.md": "a"})

    wrong_secret = Credentials(s3_server.access_key, "this-is-not-the-secret-key-at-all")
    with pytest.raises(RemoteError) as error:
        listing(open_s3(s3_server, bucket, wrong_secret))
    assert str(error.value) == "The S3 service refused the secret key (the signature does not match)."

    unknown_key = Credentials("AKIAUNKNOWNKEY000000", "this-is-not-the-secret-key-at-all")
    with pytest.raises(RemoteError) as error:
        listing(open_s3(s3_server, bucket, unknown_key))
    assert str(error.value) == "The S3 service does not know this access key."

    # Unsigned (no credentials: a public bucket). AWS answers 403 AccessDenied, which reads
    # "is not public"; moto with authentication on answers 500, so only the kind is checked.
    with pytest.raises(RemoteError):
        listing(open_s3(s3_server, bucket, Credentials()))


def test_an_unreachable_endpoint_fails_in_seconds(tmp_path: Path):
    server = S3Server(f"http://127.0.0.1:{free_port()}", "AKIAEXAMPLE", "example-secret-key")
    started = time.monotonic()
    with pytest.raises(RemoteError) as error:
        listing(open_s3(server, "bucket"))
    assert str(error.value) == "Could not reach 127.0.0.1: connection refused."
    assert time.monotonic() - started < 15

    with pytest.raises(RemoteError, match="https://"):
        open_s3(S3Server("s3.example.com", "k", "s"), "bucket")
    with pytest.raises(RemoteError, match="no bucket"):
        open_s3(server, "")

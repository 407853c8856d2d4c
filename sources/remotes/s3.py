"""An S3 bucket (AWS, MinIO, Ceph, Wasabi, Garage…), through boto3.

Listed with ListObjectsV2 under the prefix, the ETag as the change signal; fetched with
GetObject, streamed. Path-style addressing works with every S3-compatible service and needs
no DNS name per bucket. Timeouts are short and retries few, so an unreachable endpoint ends
the run in seconds rather than minutes.

Without credentials the requests go unsigned (a public bucket): boto3 must never fall back
to the credentials of the machine the portal runs on (its environment, ~/.aws, an instance
role), which would let a collection admin read whatever the portal's server may read.

Requests go over common.outbound's Connector: the endpoint's name is resolved once and
checked, and every connection goes to that address (TLS still checks the name); no proxy.
AWS's own endpoints are checked by address only, PORTAL_SOURCE_HOSTS or not, as before."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ConnectTimeoutError, EndpointConnectionError
from botocore.exceptions import ReadTimeoutError as BotoReadTimeoutError
from django.utils.translation import gettext as _

from common.outbound import Connector, OutboundError, Policy, host_and_port, unwrap
from portal.redact import scrub
from sources.remotes.base import Credentials, Entry, FileError, Location, RemoteError, file_link

CHUNK = 1024 * 1024
DEFAULT_REGION = "us-east-1"
CONFIG = Config(
    connect_timeout=10,
    read_timeout=60,
    retries={"max_attempts": 2, "mode": "standard"},
    s3={"addressing_style": "path"},
)
REFUSED_KEY = {"InvalidAccessKeyId", "InvalidClientTokenId", "InvalidToken", "ExpiredToken"}
REFUSED_SECRET = {"SignatureDoesNotMatch"}
NO_BUCKET = {"NoSuchBucket"}
NO_KEY = {"NoSuchKey", "404", "NotFound"}


def _no_region_redirects(context: dict[str, Any], **_kwargs: Any) -> None:
    """Mark each request as redirected already, so that botocore's region redirector lets an
    error answer stand: with an endpoint of the source's own it would only change the signing
    region, and a server that answers every request with a 302 sends it asking the bucket's
    region again and again, until Python's recursion limit."""
    context.setdefault("s3_redirect", {})["redirected"] = True


class S3Remote:
    def __init__(self, location: Location, credentials: Credentials) -> None:
        self.location = location
        self.credentials = credentials
        self.bucket = location.bucket.strip()
        self.prefix = location.prefix.strip("/")
        self.key_prefix = f"{self.prefix}/" if self.prefix else ""
        endpoint = location.url.strip() or None
        if endpoint and not endpoint.startswith(("https://", "http://")):
            raise RemoteError(_("An S3 endpoint starts with https:// or http:// (or stays empty for AWS)."))
        if not self.bucket:
            raise RemoteError(_("The source names no bucket."))
        self.host = (urlsplit(endpoint).hostname or endpoint) if endpoint else "s3.amazonaws.com"
        config = CONFIG if credentials.username else CONFIG.merge(Config(signature_version=UNSIGNED))
        session = boto3.session.Session(
            aws_access_key_id=credentials.username or None,
            aws_secret_access_key=credentials.password or None,
            region_name=location.region.strip() or DEFAULT_REGION,
        )
        self.client: Any = session.client("s3", endpoint_url=endpoint, config=config)
        self.endpoint = endpoint
        # AWS itself (no endpoint) is reached whatever PORTAL_SOURCE_HOSTS lists, as it always
        # was; its addresses are still checked.
        policy = Policy.from_settings()
        self.connector = Connector(policy if endpoint else replace(policy, hosts=frozenset()))
        self._http = self.connector.pin_boto3(self.client)
        if endpoint:
            self.client.meta.events.register("before-call.s3", _no_region_redirects)

    # -- what the sync calls -----------------------------------------------------------------

    def entries(self) -> Iterator[Entry]:
        if self.endpoint:  # refused here, in its own words, before botocore tries (and retries)
            try:
                self.connector.addresses(*host_and_port(self.endpoint))
            except OutboundError as exc:
                raise RemoteError(str(exc)) from None
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.key_prefix)
        try:
            for page in pages:
                for item in page.get("Contents", []):
                    key = item["Key"]
                    if key.endswith("/") or not key.startswith(self.key_prefix):
                        continue  # a "folder" marker, not a file
                    etag = str(item.get("ETag", "")).strip('"')
                    size = item.get("Size")
                    signal = etag or f"{size}:{item.get('LastModified', '')}"
                    yield Entry(key[len(self.key_prefix) :], signal, size=size)
        except (ClientError, BotoCoreError) as exc:
            raise self._run_error(exc) from None

    def fetch(self, entry: Entry, destination: Path) -> None:
        key = self.key_prefix + entry.path
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
            try:
                with destination.open("wb") as out:
                    for chunk in body.iter_chunks(CHUNK):
                        out.write(chunk)
            finally:
                body.close()
        except ClientError as exc:
            if self._code(exc) in NO_KEY:
                raise FileError(_("it was deleted from the bucket since the listing")) from None
            raise self._run_error(exc) from None
        except BotoCoreError as exc:
            raise self._run_error(exc) from None

    def link(self, path: str) -> str:
        return file_link(self.location, path)

    def close(self) -> None:
        self.client.close()
        self._http.close()

    # -- messages ----------------------------------------------------------------------------

    @staticmethod
    def _code(exc: ClientError) -> str:
        return str(exc.response.get("Error", {}).get("Code", ""))

    def _run_error(self, exc: ClientError | BotoCoreError) -> RemoteError:
        """The error in words a person can act on, with no secret in it."""
        host = self.host
        refused = unwrap(exc)
        if refused is not None:
            return RemoteError(str(refused))
        if isinstance(exc, ClientError):
            code = self._code(exc)
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in NO_BUCKET:
                return RemoteError(
                    _("The bucket “%(bucket)s” does not exist at %(host)s.") % {"bucket": self.bucket, "host": host}
                )
            if code in REFUSED_KEY:
                return RemoteError(_("The S3 service does not know this access key."))
            if code in REFUSED_SECRET:
                return RemoteError(_("The S3 service refused the secret key (the signature does not match)."))
            if code == "AccessDenied" or status == 403:
                if not self.credentials.username:
                    return RemoteError(
                        _("The bucket “%(bucket)s” is not public: give the source an access key and secret key.")
                        % {"bucket": self.bucket}
                    )
                return RemoteError(
                    _("The S3 service refused these credentials access to the bucket “%(bucket)s”.")
                    % {"bucket": self.bucket}
                )
            if code in ("PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException"):
                return RemoteError(
                    _("The bucket “%(bucket)s” is in another region than “%(region)s”: set the source's region.")
                    % {"bucket": self.bucket, "region": self.location.region or DEFAULT_REGION}
                )
            if isinstance(status, int) and 300 <= status < 400:
                return RemoteError(
                    _(
                        "The S3 service at %(host)s answered with a redirect, which is not followed: give the "
                        "source the endpoint it redirects to."
                    )
                    % {"host": host}
                )
            message = exc.response.get("Error", {}).get("Message", "") or code or str(status)
            return RemoteError(
                _("The S3 service answered: %(error)s") % {"error": scrub(message, *self.credentials.secrets())}
            )
        if isinstance(exc, ConnectTimeoutError):
            return RemoteError(_("Could not reach %(host)s: the connection timed out.") % {"host": host})
        if isinstance(exc, BotoReadTimeoutError):
            return RemoteError(_("%(host)s did not answer in time.") % {"host": host})
        if isinstance(exc, EndpointConnectionError):
            text = str(getattr(exc, "kwargs", {}).get("error", "")).lower()
            if "refused" in text:
                reason = _("connection refused")
            elif "name or service not known" in text or "nodename nor servname" in text:
                reason = _("the name does not resolve")
            else:
                reason = _("no connection")
            return RemoteError(_("Could not reach %(host)s: %(reason)s.") % {"host": host, "reason": reason})
        return RemoteError(
            _("The S3 service could not be used: %(error)s") % {"error": scrub(str(exc), *self.credentials.secrets())}
        )

"""The web server (daphne on Twisted) as the portal needs it."""

from __future__ import annotations

from typing import Any


def keep_uploads_out_of_memory() -> None:
    """Twisted parses every multipart POST body into memory (`request.args`) before daphne
    hands the request to Django, which parses it again from the spooled body and never reads
    `args`: a 200 MB upload was held whole, twice, and a body with no parts got Twisted's
    bare 400. Turned off, Django alone reads the body, streaming files to disk."""
    from daphne.http_protocol import WebRequest

    if getattr(WebRequest, "_portal_no_form_parsing", False):
        return
    original = WebRequest.__init__

    def init_without_form_parsing(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self._parsePOSTFormSubmission = False

    WebRequest.__init__ = init_without_form_parsing
    WebRequest._portal_no_form_parsing = True

"""JSON request bodies, read with a bound on nesting (common.jsonlimits).

DRF's JSONParser turns a decoding ValueError into a 400, but 100,000 `[` end in a
RecursionError, which it lets through as a 500. This parser refuses anything nested deeper
than jsonlimits.MAX_DEPTH before decoding it, with the same ParseError (400, `detail`).
REST_FRAMEWORK's DEFAULT_PARSER_CLASSES names it; a view that lists its own parsers names
it instead of DRF's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from django.utils.translation import gettext as _
from rest_framework import parsers
from rest_framework.exceptions import ParseError
from rest_framework.utils import json

from common import jsonlimits


class BoundedJSONParser(parsers.JSONParser):
    def parse(
        self, stream: IO[Any], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        # DRF hands a JSONParser (and its subclasses) the body read whole through
        # request.body, so DATA_UPLOAD_MAX_MEMORY_SIZE bounds what is read here.
        # get_encoding refuses bytes-to-bytes codecs (bz2_codec: a tiny body that expands);
        # the stubs do not know it yet.
        encoding = parsers.get_encoding(parser_context or {})  # type: ignore[attr-defined]
        try:
            text = stream.read().decode(encoding)
            jsonlimits.check_depth(text)
            return json.loads(text, parse_constant=json.strict_constant if self.strict else None)
        except jsonlimits.TooDeep as exc:
            raise ParseError(str(exc)) from None
        except ValueError as exc:  # not JSON, or not in the body's encoding
            raise ParseError(_("JSON parse error - %(error)s") % {"error": exc}) from None

"""The API's paging: REST_FRAMEWORK's DEFAULT_PAGINATION_CLASS (no drf_spectacular imports
here: DRF imports this while rest_framework.generics is still loading)."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from rest_framework import pagination
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request


class Pagination(pagination.LimitOffsetPagination):
    """LimitOffsetPagination that refuses what its schema does not allow, instead of quietly
    serving the first page (a client asking for `limit=abc` has a bug to know about)."""

    max_limit = 500
    max_offset = 2**31 - 1

    def get_limit(self, request: Request) -> int | None:
        return self._number(request, self.limit_query_param, 1, self.max_limit, self.default_limit)

    def get_offset(self, request: Request) -> int:
        return self._number(request, self.offset_query_param, 0, self.max_offset, 0) or 0

    @staticmethod
    def _number(request: Request, name: str, low: int, high: int, default: int | None) -> int | None:
        raw = request.query_params.get(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            message = _("Must be a whole number from %(low)d to %(high)d.") % {"low": low, "high": high}
            raise ValidationError({name: [message]})
        return value

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        bounds = {self.limit_query_param: (1, self.max_limit), self.offset_query_param: (0, self.max_offset)}
        for parameter in parameters:
            low, high = bounds[parameter["name"]]
            parameter["schema"] = {**parameter["schema"], "minimum": low, "maximum": high}
        return parameters

"""The sources API (sources/api/sources.py)."""

from sources.api.sources import urlpatterns

__all__ = ["urlpatterns"]

"""The sources pages (sources/views.py)."""

from sources.views import urlpatterns

__all__ = ["urlpatterns"]

"""The quality API: each module of quality/api holds its own routes."""

from quality.api import analytics, evaluations, feedback, golden

urlpatterns = [*evaluations.urlpatterns, *golden.urlpatterns, *feedback.urlpatterns, *analytics.urlpatterns]

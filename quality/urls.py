"""The quality pages of a collection (and a team's analytics): each module of
quality/views holds its own routes."""

from quality.views import analytics, evaluations, feedback, golden

urlpatterns = [*evaluations.urlpatterns, *golden.urlpatterns, *feedback.urlpatterns, *analytics.urlpatterns]

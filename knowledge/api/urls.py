from django.urls import include, path
from rest_framework.routers import DefaultRouter

from knowledge.api import views

router = DefaultRouter()
router.register("teams", views.TeamViewSet, basename="team")
router.register(r"teams/(?P<team_pk>[0-9]+)/members", views.MembershipViewSet, basename="team-member")
router.register("collections", views.CollectionViewSet, basename="collection")
router.register("tokens", views.ApiTokenViewSet, basename="token")

urlpatterns = [path("", include(router.urls))]

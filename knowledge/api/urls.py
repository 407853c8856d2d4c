from django.urls import include, path
from rest_framework.routers import DefaultRouter

from knowledge.api import audit, documents, views

# A collection's documents (listed here, uploaded there), video links and the index versions'
# actions are routed in ingestion/api/urls.py: uploading and those actions start ingestion.
router = DefaultRouter()
router.register("teams", views.TeamViewSet, basename="team")
router.register(r"teams/(?P<team_pk>[0-9]+)/members", views.MembershipViewSet, basename="team-member")
router.register(r"teams/(?P<team_pk>[0-9]+)/invitations", views.TeamInvitationViewSet, basename="team-invitation")
router.register("invitations", views.MyInvitationViewSet, basename="invitation")
router.register("collections", views.CollectionViewSet, basename="collection")
router.register("tokens", views.ApiTokenViewSet, basename="token")

urlpatterns = [
    path(
        "collections/<int:collection_id>/versions/",
        documents.CollectionVersionsView.as_view(),
        name="collection-versions",
    ),
    path("documents/<int:pk>/", documents.DocumentView.as_view(), name="document-detail"),
    path("documents/<int:pk>/pages/", documents.DocumentPagesView.as_view(), name="document-pages"),
    path("documents/<int:pk>/original/", documents.DocumentOriginalView.as_view(), name="document-original"),
    path("pages/<int:pk>/render/", documents.PageRenderView.as_view(), name="page-render"),
    path("pages/<int:pk>/images/<str:sha256>/", documents.PageImageView.as_view(), name="page-image"),
    path("audit/", audit.AuditListView.as_view(), name="audit-list"),
    path("", include(router.urls)),
]

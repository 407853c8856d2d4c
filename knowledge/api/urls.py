from django.urls import include, path
from rest_framework.routers import DefaultRouter

from knowledge.api import documents, views

router = DefaultRouter()
router.register("teams", views.TeamViewSet, basename="team")
router.register(r"teams/(?P<team_pk>[0-9]+)/members", views.MembershipViewSet, basename="team-member")
router.register("collections", views.CollectionViewSet, basename="collection")
router.register("tokens", views.ApiTokenViewSet, basename="token")

urlpatterns = [
    path(
        "collections/<int:collection_id>/documents/",
        documents.CollectionDocumentsView.as_view(),
        name="collection-documents",
    ),
    path(
        "collections/<int:collection_id>/links/",
        documents.CollectionLinksView.as_view(),
        name="collection-links",
    ),
    path(
        "collections/<int:collection_id>/versions/",
        documents.CollectionVersionsView.as_view(),
        name="collection-versions",
    ),
    path(
        "collections/<int:collection_id>/reindex/",
        documents.VersionActionView.as_view(action_name="reindex"),
        name="collection-reindex",
    ),
    path(
        "collections/<int:collection_id>/rollback/",
        documents.VersionActionView.as_view(action_name="rollback"),
        name="collection-rollback",
    ),
    path(
        "collections/<int:collection_id>/versions/<int:number>/activate/",
        documents.VersionActionView.as_view(action_name="activate"),
        name="collection-version-activate",
    ),
    path("documents/<int:pk>/", documents.DocumentView.as_view(), name="document-detail"),
    path("documents/<int:pk>/pages/", documents.DocumentPagesView.as_view(), name="document-pages"),
    path("documents/<int:pk>/original/", documents.DocumentOriginalView.as_view(), name="document-original"),
    path("pages/<int:pk>/render/", documents.PageRenderView.as_view(), name="page-render"),
    path("pages/<int:pk>/images/<str:sha256>/", documents.PageImageView.as_view(), name="page-image"),
    path("", include(router.urls)),
]

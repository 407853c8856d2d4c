from django.urls import path

from ingestion.api import documents

urlpatterns = [
    path(
        "collections/<int:collection_id>/documents/",
        documents.DocumentUploadView.as_view(),
        name="collection-documents",
    ),
    path(
        "collections/<int:collection_id>/links/",
        documents.CollectionLinksView.as_view(),
        name="collection-links",
    ),
    path("documents/<int:pk>/rerun/", documents.DocumentRerunView.as_view(), name="document-rerun-api"),
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
]

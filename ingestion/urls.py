from django.urls import path

from ingestion import views

urlpatterns = [
    path("collections/<int:collection_id>/upload/", views.collection_upload, name="collection-upload"),
    path("documents/<int:document_id>/rerun/", views.document_rerun, name="document-rerun"),
]

from django.urls import path

from knowledge import audit_views, document_views, views

# Uploading and indexing again start ingestion: their pages are in ingestion/urls.py.

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("collections/new/", views.collection_create, name="collection-create"),
    path("collections/<int:collection_id>/", views.collection_detail, name="collection"),
    path("collections/<int:collection_id>/rename/", views.collection_rename, name="collection-rename"),
    path("collections/<int:collection_id>/settings/", views.collection_settings, name="collection-settings"),
    path("collections/<int:collection_id>/delete/", views.collection_delete, name="collection-delete"),
    path("documents/<int:document_id>/", document_views.document_detail, name="document"),
    path("documents/<int:document_id>/pages/<int:number>/", document_views.document_page, name="document-page"),
    path("documents/<int:document_id>/delete/", document_views.document_delete, name="document-delete"),
    path("teams/", views.team_list, name="teams"),
    path("teams/<int:team_id>/", views.team_detail, name="team"),
    path("teams/<int:team_id>/members/<int:membership_id>/role/", views.member_role, name="member-role"),
    path("teams/<int:team_id>/members/<int:membership_id>/remove/", views.member_remove, name="member-remove"),
    path(
        "teams/<int:team_id>/invitations/<int:invitation_id>/resend/",
        views.invitation_resend,
        name="resend-invitation",
    ),
    path(
        "teams/<int:team_id>/invitations/<int:invitation_id>/revoke/",
        views.invitation_revoke,
        name="revoke-invitation",
    ),
    path("invitations/", views.invitation_list, name="invitations"),
    path("invitations/<int:invitation_id>/accept/", views.invitation_accept, name="accept-invitation"),
    path("invitations/<int:invitation_id>/decline/", views.invitation_decline, name="decline-invitation"),
    path("tokens/", views.token_list, name="tokens"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="token-revoke"),
    path("audit/", audit_views.audit_log, name="audit"),
]

from django.urls import path

from knowledge import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("collections/new/", views.collection_create, name="collection-create"),
    path("collections/<int:collection_id>/", views.collection_detail, name="collection"),
    path("collections/<int:collection_id>/rename/", views.collection_rename, name="collection-rename"),
    path("collections/<int:collection_id>/upload/", views.collection_upload, name="collection-upload"),
    path("collections/<int:collection_id>/delete/", views.collection_delete, name="collection-delete"),
    path("teams/", views.team_list, name="teams"),
    path("teams/<int:team_id>/", views.team_detail, name="team"),
    path("teams/<int:team_id>/members/<int:membership_id>/role/", views.member_role, name="member-role"),
    path("teams/<int:team_id>/members/<int:membership_id>/remove/", views.member_remove, name="member-remove"),
    path("tokens/", views.token_list, name="tokens"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="token-revoke"),
]

from django.urls import path

from assistant import views

# Names start with "my-": the REST router already names its routes "memory-*".
urlpatterns = [
    path("memory/", views.memory_page, name="my-memory"),
    path("memory/delete-all/", views.memory_delete_all, name="my-memory-delete-all"),
    path("memory/<str:memory_id>/edit/", views.memory_edit, name="my-memory-edit"),
    path("memory/<str:memory_id>/delete/", views.memory_delete, name="my-memory-delete"),
]

from django.urls import path

from assistant import chat_views, memory_views

# Names start with "my-": the REST router already names its routes "memory-*".
urlpatterns = [
    path("memory/", memory_views.memory_page, name="my-memory"),
    path("memory/delete-all/", memory_views.memory_delete_all, name="my-memory-delete-all"),
    path("memory/<str:memory_id>/edit/", memory_views.memory_edit, name="my-memory-edit"),
    path("memory/<str:memory_id>/delete/", memory_views.memory_delete, name="my-memory-delete"),
    path("chat/", chat_views.chat, name="chat"),
    path("chat/<int:conversation_id>/", chat_views.chat, name="chat-conversation"),
    path("chat/<int:conversation_id>/delete/", chat_views.chat_delete, name="chat-delete"),
]

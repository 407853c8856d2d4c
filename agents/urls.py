from django.urls import path

from agents.completions import ChatCompletionsView, ModelsView

urlpatterns = [
    path("models", ModelsView.as_view(), name="openai-models"),
    path("chat/completions", ChatCompletionsView.as_view(), name="openai-chat-completions"),
]

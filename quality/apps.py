from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class QualityConfig(AppConfig):
    name = "quality"
    verbose_name = _("Answer quality")

    def ready(self) -> None:
        from assistant import hooks as chat_hooks
        from knowledge import hooks
        from quality import feedback, gate

        # A finished build of a collection with golden questions is evaluated before it flips.
        hooks.register_flip_gate(gate.hold_for_evaluation)
        # The chat page shows each answer's thumbs and the user's own feedback on it.
        chat_hooks.register_answer_feedback(feedback.answer_feedback)

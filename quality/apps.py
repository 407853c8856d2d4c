from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class QualityConfig(AppConfig):
    name = "quality"
    verbose_name = _("Answer quality")

    def ready(self) -> None:
        from knowledge import hooks
        from quality import gate

        # A finished build of a collection with golden questions is evaluated before it flips.
        hooks.register_flip_gate(gate.hold_for_evaluation)

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class OperationsConfig(AppConfig):
    name = "operations"
    verbose_name = _("Operations")

    def ready(self) -> None:
        from operations.instrumentation import connect_celery

        connect_celery()  # each task's duration and state, for /metrics

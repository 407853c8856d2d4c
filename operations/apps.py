from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class OperationsConfig(AppConfig):
    name = "operations"
    verbose_name = _("Operations")

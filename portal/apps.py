from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = _("Portal")

    def ready(self) -> None:
        from allauth.account.signals import password_reset
        from django.contrib.auth.signals import user_logged_in

        from portal import checks  # noqa: F401  (registers the checks)
        from portal.adapters import audit_staff_login, confirm_address_on_reset

        user_logged_in.connect(audit_staff_login, dispatch_uid="portal.audit_staff_login")
        password_reset.connect(confirm_address_on_reset, dispatch_uid="portal.confirm_address_on_reset")

from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_delete
from django.utils.translation import gettext_lazy as _


class AssistantConfig(AppConfig):
    name = "assistant"
    verbose_name = _("Assistant")

    def ready(self) -> None:
        from assistant import checks  # noqa: F401  (registers the checks)

        post_delete.connect(forget_deleted_user, sender=settings.AUTH_USER_MODEL, dispatch_uid="forget-deleted-user")


def forget_deleted_user(sender: Any, instance: Any, **kwargs: Any) -> None:
    """A deleted account's memories go with it (mem0's rows are not Django's: no cascade)."""
    uid = str(instance.uid)

    def forget() -> None:
        from assistant.memory.service import forget_user

        forget_user(uid)

    transaction.on_commit(forget, robust=True)  # a failure is logged; the account is gone either way

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register
from django.db import DatabaseError


@register(Tags.database)
def check_memory_dims(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Runs before `migrate` (so at every `manage.py up`) and with `check --database default`:
    memories made with one embedding size cannot be searched with another."""
    if not kwargs.get("databases") or not settings.MEMORY_ENABLED:
        return []
    from assistant.memory.errors import MemoryUnavailable
    from assistant.memory.setup import check_dims

    try:
        check_dims()
    except DatabaseError:
        return []  # unreachable: portal.E001 says so
    except MemoryUnavailable as exc:
        return [Error(str(exc), hint="Set PROVIDER_EMBEDDING / MODEL_EMBEDDING back, or PORTAL_MEMORY=false.",
                      id="assistant.E001")]  # fmt: skip
    return []

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Tags, register

from portal.health import database_unreachable


@register(Tags.database)
def check_database_reachable(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Runs before `migrate` (and `check --database default`): an unreachable database is
    reported with the variable to fix instead of a driver traceback."""
    if not kwargs.get("databases"):
        return []
    problem = database_unreachable()
    if problem is None:
        return []
    return [Error(problem, hint="Check DATABASE_URL, or unset it to use the embedded server.", id="portal.E001")]

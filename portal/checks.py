from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register

from portal.health import database_unreachable, storage_unreachable


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


@register("storage", Tags.database)
def check_storage_reachable(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """With PORTAL_STORAGE=s3, runs where the database check does (`migrate`, which `up` and
    the containers run before web and workers start; `check --database default`): a wrong
    key, a missing bucket or an unreachable endpoint stops start-up naming the setting."""
    if not kwargs.get("databases"):
        return []
    return _storage_errors()


@register("storage", deploy=True)
def check_storage_deploy(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The same for `manage.py check --deploy`."""
    return _storage_errors()


def _storage_errors() -> list[CheckMessage]:
    problem = storage_unreachable()
    if problem is None:
        return []
    return [
        Error(
            problem,
            hint="Check PORTAL_S3_ENDPOINT_URL, PORTAL_S3_BUCKET and the PORTAL_S3_* keys (or PORTAL_STORAGE=local).",
            id="portal.E002",
        )
    ]


@register(deploy=True)
def check_secret_key_shared(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """`check --deploy` with files in an object store (more than one machine, then): a
    SECRET_KEY generated into var/secret_key differs on each machine, so sessions, reset
    links and sources' credentials would not hold across them (docs/machines.md)."""
    if settings.SECRET_KEY_FROM_ENV or settings.STORAGE_KIND != "s3":
        return []
    return [
        Warning(
            "SECRET_KEY was generated on this machine (var/secret_key): each machine of a cluster makes its own.",
            hint="Set SECRET_KEY in the environment, the same on every machine.",
            id="portal.W001",
        )
    ]

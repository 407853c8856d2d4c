"""Reading settings from the environment, failing loudly on bad values.

Every reader names the variable in its error, so a person can fix the right line
(healthchecks `hc/settings.py` `envbool()` does the same).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false (1/0, yes/no, on/off), not {raw!r}.")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {raw!r}.") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {value}.")
    return value


def env_float(name: str, default: float, *, minimum: float = 0.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, not {raw!r}.") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {value}.")
    return value


def env_weights(name: str, default: dict[str, float]) -> dict[str, float]:
    """`key=number` pairs separated by commas, for keys of `default` only."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return dict(default)
    weights = dict(default)
    for pair in raw.split(","):
        key, _sep, value = pair.partition("=")
        key = key.strip()
        if key not in default:
            raise ImproperlyConfigured(f"{name}: unknown key {key!r} (known: {', '.join(default)}).")
        try:
            weights[key] = float(value)
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {key} needs a number, not {value.strip()!r}.") from None
    return weights


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default).lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, not {value!r}.")
    return value


def parse_database_url(url: str, name: str = "DATABASE_URL", conn_max_age: int = 60) -> dict[str, object]:
    """Turns postgres://user:pass@host:port/db?sslmode=x into Django's DATABASES entry.

    A socket directory can be given as `?host=/path` (libpq's own convention).
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql", "pgsql"):
        raise ImproperlyConfigured(
            f"{name} must be a PostgreSQL URL such as postgres://user:password@host:5432/portal, "
            f"not one with scheme {parts.scheme!r}."
        )
    database = unquote(parts.path.lstrip("/"))
    if not database:
        raise ImproperlyConfigured(f"{name} must name a database, e.g. postgres://user@host:5432/portal.")
    options = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    host = options.pop("host", "") or (parts.hostname or "")
    try:
        port = parts.port
    except ValueError:
        raise ImproperlyConfigured(f"{name} has an invalid port: {url!r}.") from None
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": database,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": str(port or ""),
        "OPTIONS": options,
        "CONN_MAX_AGE": conn_max_age,
        "CONN_HEALTH_CHECKS": True,
    }


def check_redis_url(url: str, name: str = "REDIS_URL") -> str:
    scheme = urlsplit(url).scheme
    if scheme not in ("redis", "rediss", "unix"):
        raise ImproperlyConfigured(
            f"{name} must be a Redis URL such as redis://127.0.0.1:6379/0 or unix:///path/redis.sock, "
            f"not one with scheme {scheme!r}."
        )
    return url


def celery_redis_url(url: str) -> str:
    """Celery and kombu spell a unix-socket Redis URL `redis+socket://`, redis-py `unix://`."""
    if url.startswith("unix://"):
        return "redis+socket://" + url[len("unix://") :]
    return url


def redact_url(url: str) -> str:
    """The URL with its password replaced, safe to print and log."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def load_secret_key(var_dir: Path) -> str:
    """SECRET_KEY from the environment, else one generated once and kept under var/."""
    key = env_str("SECRET_KEY")
    if key:
        if len(key) < 32:
            raise ImproperlyConfigured("SECRET_KEY must be at least 32 characters long.")
        return key
    path = var_dir / "secret_key"
    if path.exists():
        return path.read_text().strip()
    var_dir.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    # O_EXCL: when two processes start at once, the first one's key wins for both.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    return key


def read_key_list(path: Path) -> list[str]:
    """Comma-separated keys kept in a private file under var/ (written by a restore)."""
    try:
        return [key.strip() for key in path.read_text().split(",") if key.strip()]
    except FileNotFoundError:
        return []


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines, as written by `manage.py up` for the embedded services."""
    if not path.exists():
        return {}
    values = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.startswith("#"):
            values[key.strip()] = value.strip()
    return values

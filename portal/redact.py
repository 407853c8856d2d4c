"""Secrets never reach a log line or an error message.

What counts as a secret: the value of every environment variable whose name says it is one
(…_KEY, …_SECRET, …_PASSWORD, …_TOKEN: SECRET_KEY, API_KEY_CHAT, OPENAI_API_KEY, …) and
the password in any URL. `scrub()` replaces them with ***; `RedactSecrets` does it to every
record of the web process's and the worker's log handlers, tracebacks included; provider
errors scrub their messages, since a provider may echo a key back."""

from __future__ import annotations

import logging
import os
import re
from functools import lru_cache

SECRET_NAME = re.compile(r"(^|_)(KEY|SECRET|PASSWORD|PASSWD|TOKEN)(_|$)")
URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]*):(?P<password>[^@/\s]+)@", re.I)
MIN_LENGTH = 8  # shorter values would scrub ordinary words


@lru_cache(maxsize=1)
def secret_values() -> tuple[str, ...]:
    """The secrets of this process's environment, longest first (cached: call
    `secret_values.cache_clear()` after changing the environment)."""
    found = {value for name, value in os.environ.items() if SECRET_NAME.search(name.upper())}
    for value in os.environ.values():
        found.update(match["password"] for match in URL_PASSWORD.finditer(value))
    return tuple(sorted((v for v in found if len(v) >= MIN_LENGTH), key=len, reverse=True))


def scrub(text: str, *extra: str) -> str:
    """`text` without the environment's secrets, URL passwords, or the `extra` values."""
    for secret in (*extra, *secret_values()):
        if secret and len(secret) >= MIN_LENGTH:
            text = text.replace(secret, "***")
    return URL_PASSWORD.sub(r"\g<scheme>\g<user>:***@", text)


class RedactSecrets(logging.Filter):
    """A handler filter: the record's message and traceback are formatted here, scrubbed,
    and passed on with no arguments left to format."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.msg, record.args = scrub(message), ()
        if record.exc_text:
            record.exc_text = scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub(record.stack_info)
        return True


def redact_handlers(logger: logging.Logger) -> None:
    """Put the filter on every handler of `logger` (Celery sets up its own handlers)."""
    for handler in logger.handlers:
        if not any(isinstance(f, RedactSecrets) for f in handler.filters):
            handler.addFilter(RedactSecrets())

"""One redaction step for everything contextlens writes or says: secrets never reach a file,
a log, a report, the run store or a message.

:func:`redact` masks, in any text:

- the user-info of a URL (``http://user:sk-...@host`` -> ``http://***@host``);
- the values of ``api_key``, ``apikey``, ``key``, ``token``, ``access_token``, ``secret``,
  ``password`` and ``sig`` parameters in a URL's query (``?api_key=...``);
- ``Authorization`` / ``Proxy-Authorization`` headers (``Bearer ...``, ``Basic ...``) and
  ``api-key`` / ``x-api-key`` headers, however they are quoted (a 400 body echoing the
  request's headers);
- the values of the environment variables that hold keys: the known providers' (see
  :data:`KEY_VARIABLES`), any variable whose name ends in ``_API_KEY``, ``_TOKEN``, ``_SECRET``
  or ``_PASSWORD``, and those the user names in ``CONTEXTLENS_SECRET_VARS`` (comma-separated);
- secrets registered in this process with :func:`register_secret` (a key given in code).

Each mask is ``***``. The terminal, the result sink, the run store, the report, the logs and
every error the backends raise go through it.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable

__all__ = [
    "KEY_VARIABLES",
    "MASK",
    "RedactingFilter",
    "logger",
    "redact",
    "register_secret",
    "secrets_in_environment",
]

MASK = "***"
#: Environment variables known to hold keys, besides any ``*_API_KEY``, ``*_TOKEN``,
#: ``*_SECRET`` and ``*_PASSWORD``.
KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "MISTRAL_API_KEY",
    "COHERE_API_KEY",
    "GROQ_API_KEY",
    "TOGETHER_API_KEY",
    "HF_TOKEN",
    "HUGGINGFACEHUB_API_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
)
_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_ACCESS_KEY")
#: The variable naming more variables whose values are secrets.
USER_VARIABLE = "CONTEXTLENS_SECRET_VARS"
#: Shorter values are not masked: they would mask ordinary words.
_MIN_SECRET = 6

_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@'\"<>]+@")
_QUERY_SECRET = re.compile(
    r"(?i)([?&;](?:api[_-]?key|key|token|access[_-]?token|secret|password|sig)=)[^&#\s'\"<>]+"
)
_AUTH_HEADER = re.compile(
    r"(?i)((?:proxy-)?authorization['\"]?\s*[:=]\s*['\"]?\s*(?:bearer|basic|token)?\s*)"
    r"[^\s'\",}]+"
)
_KEY_HEADER = re.compile(r"(?i)((?:x-)?api[-_]key['\"]?(?:\s*:\s*|=)['\"]?)[^\s'\",}]+")
_BEARER = re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}")

_registered: set[str] = set()
_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Mask ``value`` (a key given in code rather than the environment) from now on."""
    if value and len(value) >= _MIN_SECRET:
        with _lock:
            _registered.add(value)


def _is_key_variable(name: str, extra: Iterable[str]) -> bool:
    upper = name.upper()
    return upper in KEY_VARIABLES or upper.endswith(_SUFFIXES) or name in extra


def secrets_in_environment() -> list[str]:
    """The values of the environment's key variables (longest first)."""
    extra = {v.strip() for v in os.environ.get(USER_VARIABLE, "").split(",") if v.strip()}
    found = {
        value
        for name, value in os.environ.items()
        if len(value) >= _MIN_SECRET and _is_key_variable(name, extra)
    }
    with _lock:
        found |= _registered
    return sorted(found, key=len, reverse=True)


def redact(text: str) -> str:
    """``text`` with every secret it holds masked (see the module docstring)."""
    if not text:
        return text
    for secret in secrets_in_environment():
        if secret in text:
            text = text.replace(secret, MASK)
    text = _URL_USERINFO.sub(rf"\1{MASK}@", text)
    text = _QUERY_SECRET.sub(rf"\1{MASK}", text)
    text = _AUTH_HEADER.sub(rf"\1{MASK}", text)
    text = _KEY_HEADER.sub(rf"\1{MASK}", text)
    return _BEARER.sub(rf"\1{MASK}", text)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's message (installed on the
    ``contextlens`` logger)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def logger(name: str) -> logging.Logger:
    """The logger ``name`` (under ``contextlens``), its records redacted: a filter on a
    logger does not reach its children, so each of contextlens's loggers gets its own."""
    found = logging.getLogger(name)
    if not any(isinstance(f, RedactingFilter) for f in found.filters):
        found.addFilter(RedactingFilter())
    return found

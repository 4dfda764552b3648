"""One redaction step for everything contextlens writes or says: secrets never reach a file,
a log, a report, the run store or a message.

:func:`redact` masks, in any text:

- the user-info of a URL up to the last ``@`` before the host (``http://user:p@ss@host`` ->
  ``http://***@host``), also protocol-relative (``//user:pw@host``);
- the value of any parameter (``?name=``, ``&name=``, ``name=`` in text) whose name is or
  ends in ``secret``, ``token``, ``signature``, ``key``, ``password``, ``passwd``, ``pwd``,
  ``credential(s)`` or ``auth``, in any case, after ``-``, ``_``, ``.``, ``%5F``, ``%2D`` or a
  capital (``client_secret``, ``X-Amz-Signature``, ``api%5Fkey``, ``clientSecret``) or glued to
  a usual word (``apikey``, ``accesstoken``); ``sig`` in a query; a bare ``key=`` only in a
  query (``a key=value pair`` is prose, ``monkey=3`` no key);
- ``Authorization`` / ``Proxy-Authorization`` headers (``Bearer ...``, ``Basic ...``),
  ``api-key`` / ``x-api-key`` headers and any header (or JSON / YAML key) named ``*-token``,
  ``*-key``, ``*-secret``, ``*-signature``, ``*-auth``, ``*-credentials``, ``*-password`` or
  the same with ``_`` (``PRIVATE-TOKEN``, ``X-Auth-Token``, ``Ocp-Apim-Subscription-Key``,
  ``"refresh_token": "..."``), however they are quoted (a 400 body echoing the request's
  headers);
- each cookie's value in a ``Cookie`` / ``Set-Cookie`` header (``session=***; theme=***``);
- a ``bearer`` token anywhere;
- the values of the environment variables that hold keys: the known providers' (see
  :data:`KEY_VARIABLES`), any variable whose name ends in ``_API_KEY``, ``_TOKEN``, ``_SECRET``
  or ``_PASSWORD``, and those the user names in ``CONTEXTLENS_SECRET_VARS`` (comma-separated);
- secrets registered in this process with :func:`register_secret` (a key given in code).

Each mask is ``***``. The terminal, the result sink, the run store, the report, the logs and
every error the backends raise go through it. :func:`redact` takes time linear in the length
of its text, whatever the text holds (a megabyte in a few milliseconds). The files
contextlens writes (``results.jsonl``, ``cases.jsonl``, the report, CSV, JUnit) mask each
string with :func:`redact_value` before it is serialized, never the serialized text, so a
mask cannot eat the quote or the bracket after a secret.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "KEY_VARIABLES",
    "MASK",
    "RedactingFilter",
    "Redactor",
    "logger",
    "redact",
    "redact_value",
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


def _once(name: str, run: str) -> str:
    """``run`` matched as far as it goes and never given back, so a failed match does not
    retry shorter runs: an atomic group where the regex engine has them (Python 3.11),
    else a lookahead (atomic) capturing the run and a backreference consuming it."""
    if sys.version_info >= (3, 11):
        return f"(?>{run})"
    return rf"(?=(?P<{name}>{run}))(?P={name})"


# The patterns run over the text lowered (so each starts with a literal the regex engine
# finds at once) and mark the value to mask as group ``v``. Each is linear in its text: a run
# of spaces is matched whole and never given back (:func:`_once`), so no two repetitions can
# split the same characters between them (an ``authorization:`` then a page of spaces), and
# a URL's userinfo is looked for only after a ``://`` (a long dotted or hyphenated word is
# passed over at once).
#
# A masked value ends at a space, a quote, a backslash or a bracket (and a header's value
# does not begin with a colon), so masking text that holds serialized JSON, HTML or XML (a
# log line quoting a body, a row of the run store) never eats an escape, the end of a string
# or a bracket: the value masked stays inside the string it is in. contextlens's own files
# mask each string before it is serialized (:func:`redact_value`), never their text.
_END = r"\s'\"`,;(){}\[\]<>&\\"
_VALUE = rf"(?P<v>[^:{_END}][^{_END}]*)"
_QUOTE = r"\\?['\"]"


def _named(name: str) -> str:
    """A header's name, its ``:`` or ``=`` and the quote before its value: ``name: v``,
    ``name="v"``, ``"name": "v"`` (a quoted name takes a quoted value only, so in JSON text
    a ``null`` or a number after ``"api_key":`` is never masked into invalid JSON)."""
    spaces = [_once(f"s{i}", r"\s*") for i in range(6)]
    quoted = f"{_QUOTE}{spaces[0]}[:=]{spaces[1]}{_QUOTE}{spaces[2]}"
    bare = f"{spaces[3]}[:=]{spaces[4]}(?:{_QUOTE}{spaces[5]})?"
    return f"{name}(?:{quoted}|{bare})"


#: The last word of a parameter's or a header's name that makes its value a secret.
_SECRET_WORDS = (
    "secret", "token", "signature", "key", "password", "passwd", "pwd", "credentials",
    "credential", "auth",
)  # fmt: skip
#: Names a secret word ends without a separator (``apikey``, ``accesstoken``).
_GLUED = {
    "key": ("api", "secret", "access", "private", "subscription", "signing"),
    "token": ("access", "refresh", "auth", "id", "session", "api", "bearer"),
    "secret": ("client", "app", "api", "shared"),
}
_WORDS = "|".join(_SECRET_WORDS)
#: A header's value that may start with an authentication scheme.
_SCHEME = "(?:(?:bearer|basic|token)" + _once("t", r"[ \t]+") + ")?"
#: A cookie: ``name=value`` then more ``; name=value`` (a cookie's value holds no space,
#: comma, semicolon, quote or backslash). The first name is matched once and holds none of
#: the separators (``:``, ``=``, ``/``, quotes...), so it never runs into the next
#: ``cookie:`` and no two tries scan the same name.
_CRUMB = r"[^;\s'\"`\\<>,]"
_COOKIE_VALUE = (
    "(?P<v>"
    + _once("n", r"[^=;\s'\"`\\<>,:/@()\[\]?{}]+")
    + f"={_CRUMB}+(?:;"
    + _once("c", r"[ \t]*")
    + f"{_CRUMB}+)*)"
)

_PATTERNS = tuple(
    re.compile(pattern)
    for pattern in (
        # the user-info of a URL: scheme://USER:PASSWORD@host, up to the last @ before the
        # host (a password may hold an @); the run is matched once and given back to its last
        # @ only, and ends at the next /, so runs after two ://s never overlap
        r"://(?<=[a-z0-9+.-]://)(?P<v>[^/\s'\"`<>\\]+)@",
        # a protocol-relative URL's: //USER:PASSWORD@host, after a space, a quote, a bracket
        r"//(?<![^\s'\"`(<\[{=,;]//)(?P<v>[^/\s'\"`<>\\:@]+:[^/\s'\"`<>\\]*)@",
        # ?api_key=VALUE in a query (a fragment after it is kept)
        r"[?&;](?:api[_-]?key|apikey|key|token|access[_-]?token|secret|password|passwd|pwd"
        r"|sig|signature|credentials?|auth)="
        r"(?P<v>[^&#\s'\"`<>\\]+)",
        # (proxy-)authorization: [bearer|basic|token] VALUE
        _named("authorization") + _SCHEME + _VALUE,
        # (x-)api-key: VALUE, api_key=VALUE
        _named("api[-_]key") + _VALUE,
        # any header (or JSON key, YAML key) named *-token, *-key, *-secret, *-signature,
        # *-auth, *-credentials, *-password, or with a _: private-token: VALUE
        _named(rf"[-_](?:{_WORDS})") + _SCHEME + _VALUE,
        # bearer TOKEN anywhere
        r"bearer(?<!\wbearer)" + _once("b", r"\s+") + r"(?P<v>[a-z0-9._~+/=-]{8,})",
    )
)


def _parameter_pattern() -> re.Pattern[str]:
    """``NAME=VALUE`` where NAME is a secret word (``token=``, ``password=``), or ends in one
    after a ``-``, ``_``, ``.``, ``%5F`` or ``%2D`` (``client_secret=``, ``X-Amz-Signature=``,
    ``api%5Fkey=``), after a lower-case letter or digit as the capital that starts a word
    (``clientSecret=``), or glued to a word it often follows (``apikey=``). A bare ``key=``
    outside a query is ordinary text (``a key=value pair``), and ``monkey=`` is not a key.

    Run over the text itself (the capital of ``clientSecret`` counts), case-insensitive in
    ASCII. It starts at the ``=`` and looks back a fixed width from there, so each ``=`` is
    tried once; a bare name right after ``?``, ``&`` or ``;`` is the query pattern's."""
    ways = []
    for word in _SECRET_WORDS:
        tail = f"{word}="
        before = [
            f"(?<=[-_.]{tail})",
            f"(?<=%5f{tail})",
            f"(?<=%2d{tail})",
            f"(?<=(?-i:[a-z0-9]{word[0].upper()}){word[1:]}=)",
        ]
        before += [f"(?<={glued}{tail})" for glued in _GLUED.get(word, ())]
        if word != "key":
            before.append(f"(?<![a-z0-9_.%?&;-]{tail})")
        # a bare name after ?, & or ; is the query pattern's: refused at once
        ways.append(f"(?<={tail})(?<![?&;]{tail})(?:{'|'.join(before)})")
    last = "".join(sorted({word[-1] for word in _SECRET_WORDS}))
    return re.compile(
        rf"=(?<=[{last}]=)(?:{'|'.join(ways)})(?P<v>[^{_END}]+)", re.IGNORECASE | re.ASCII
    )


#: The patterns run over the text as it is (not lowered).
_CASED_PATTERNS = (_parameter_pattern(),)
#: ``Cookie: a=1; b=2``: each cookie's value is masked, its name kept.
_COOKIE = re.compile(r"cookie(?<![a-z0-9]cookie)" + _named("") + _COOKIE_VALUE)


def _cookie_values(low: str, start: int, end: int) -> list[tuple[int, int]]:
    """The values of the cookies in ``low[start:end]`` (``a=1; b=2``)."""
    spans = []
    for crumb in low[start:end].split(";"):
        equals = crumb.find("=")
        if 0 <= equals < len(crumb) - 1:
            spans.append((start + equals + 1, start + len(crumb)))
        start += len(crumb) + 1
    return spans


def _spans(text: str, low: str) -> list[tuple[int, int]]:
    """Where the values to mask are in ``text`` (``low`` is ``text`` lowered), sorted."""
    spans = [m.span("v") for pattern in _PATTERNS for m in pattern.finditer(low)]
    spans += [m.span("v") for pattern in _CASED_PATTERNS for m in pattern.finditer(text)]
    for m in _COOKIE.finditer(low):
        spans += _cookie_values(low, *m.span("v"))
    spans.sort()
    return spans


#: Upper-case ASCII letters to lower case, for text whose ``lower()`` changes its length.
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")

_registered: set[str] = set()
_lock = threading.Lock()
#: The environment (as ``os.environ`` holds it) and the registered secrets last read, with
#: the secrets found in them: reading the environment again for each text would cost more
#: than masking it.
_last: tuple[object, list[str]] | None = None


def register_secret(value: str | None) -> None:
    """Mask ``value`` (a key given in code rather than the environment) from now on."""
    if value and len(value) >= _MIN_SECRET:
        with _lock:
            _registered.add(value)


def _is_key_variable(name: str, extra: Iterable[str]) -> bool:
    upper = name.upper()
    return upper in KEY_VARIABLES or upper.endswith(_SUFFIXES) or name in extra


def secrets_in_environment() -> list[str]:
    """The values of the environment's key variables and the registered secrets (longest
    first); read again only when the environment or the registered secrets changed."""
    global _last
    data = getattr(os.environ, "_data", None)  # encoded names and values: cheap to compare
    with _lock:
        state = (tuple(data.items()), frozenset(_registered)) if isinstance(data, dict) else None
        if state is not None and _last is not None and _last[0] == state:
            return list(_last[1])
        registered = set(_registered)
    extra = {v.strip() for v in os.environ.get(USER_VARIABLE, "").split(",") if v.strip()}
    found = {
        value
        for name, value in os.environ.items()
        if len(value) >= _MIN_SECRET and _is_key_variable(name, extra)
    }
    ordered = sorted(found | registered, key=len, reverse=True)
    if state is not None:
        _last = (state, ordered)
    return list(ordered)


def redact(text: str) -> str:
    """``text`` with every secret it holds masked (see the module docstring); linear in the
    length of ``text``."""
    return _masked(text, secrets_in_environment()) if text else text


def _masked(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    # the patterns are ASCII, and U+0130 is the one character that lowers to two
    low = (text.replace("\u0130", "I") if "\u0130" in text else text).lower()
    if ":" not in low and "=" not in low and "bearer" not in low:
        return text  # no pattern can match
    if len(low) != len(text):
        low = text.translate(_ASCII_LOWER)
    spans = _spans(text, low)
    if not spans:
        return text
    parts: list[str] = []
    kept = 0  # text[:kept] is in parts
    for start, end in spans:
        if start > kept or not parts:
            parts += (text[kept:start], MASK)
        kept = max(kept, end)  # a value two patterns found is masked once
    parts.append(text[kept:])
    return "".join(parts)


def redact_value(value: Any) -> Any:
    """``value`` with every string in it masked as :func:`redact` masks text, at any depth:
    the keys and values of dicts, the items of lists and tuples. The structure (nesting,
    order, numbers, booleans, None) is left as it is, so the value serialized after masking
    is as valid a document as before, whatever its strings held; masking the serialized
    text instead could eat an escaped quote or a closing bracket. Two keys that mask to the
    same text are kept apart with a ``#2``, ``#3``... suffix."""
    return _walk(value, secrets_in_environment())


class Redactor:
    """:func:`redact` and :func:`redact_value` with the secrets of the moment it is made: for
    masking many texts at once (the cells of a file) without reading the environment for
    each."""

    def __init__(self) -> None:
        self.secrets = secrets_in_environment()

    def text(self, text: str) -> str:
        """``text`` masked as :func:`redact` masks it."""
        return _masked(text, self.secrets) if text else text

    def value(self, value: Any) -> Any:
        """``value`` masked as :func:`redact_value` masks it."""
        return _walk(value, self.secrets)


def _walk(value: Any, secrets: Sequence[str]) -> Any:
    if isinstance(value, str):
        return _masked(value, secrets) if value else value
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(key, str) and key:
                masked = _masked(key, secrets)
                if masked != key:
                    key, n = masked, 1
                    while key in out or key in value:
                        n += 1
                        key = f"{masked}#{n}"
            out[key] = _walk(item, secrets)
        return out
    if isinstance(value, list):
        return [_walk(item, secrets) for item in value]
    if isinstance(value, tuple):
        return tuple(_walk(item, secrets) for item in value)
    return value


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

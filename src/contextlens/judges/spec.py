"""Judge spec strings, parsed once into typed objects, and the backends they name.

A spec names a backend kind and a target, and may end in settings::

    openai:gpt-4o-mini
    http://127.0.0.1:8080/v1#smollm2?timeout=600&max_tokens=400&concurrency=2
    litellm:anthropic/claude-3-5-haiku-latest
    llama:/models/SmolLM2.gguf?structured_output=json_object

:meth:`JudgeSpec.parse` reads one into a :class:`JudgeSpec` (kind, target, typed
:class:`JudgeSettings`); a wrong setting is a ``ValueError`` naming it, found before anything
is built. Backend kinds register by name with :func:`backend_kind`, as Inspect AI's model APIs
do: each backend module declares the prefixes of its specs and how it is built from one.
A spec with no known prefix and no ``:`` is a bare model name: ``PROVIDER/MODEL`` goes to
LiteLLM, anything else to OpenAI (each kind says which bare names it takes).
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from contextlens.backend import ChatBackend
from contextlens.judges.formats import structured_mode
from contextlens.redact import redact

__all__ = [
    "OFFLINE",
    "BackendKind",
    "JudgeSettings",
    "JudgeSpec",
    "backend_kind",
    "is_offline",
    "is_spec",
    "kinds",
]

OFFLINE = "offline"
ENTRY_POINT_GROUP = "contextlens.judges"
#: The modules of contextlens that register backend kinds, imported on first use.
_BUILT_IN = (
    "contextlens.judges.openai_compat",
    "contextlens.judges.anthropic",
    "contextlens.judges.litellm",
    "contextlens.judges.llama_cpp",
)


class JudgeSettings(BaseModel):
    """Settings a spec may carry after ``?``; each None leaves the backend's default.

    ``timeout``: seconds per call, from when it is sent. ``max_tokens``: completion tokens
    per call. ``concurrency``: calls in flight at most. ``structured_output``: ``auto``,
    ``json_schema``, ``json_object`` or ``off``. ``temperature`` and ``seed``: sent with
    each request.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    max_tokens: int | None = Field(default=None, gt=0)
    concurrency: int | None = Field(default=None, gt=0)
    structured_output: str | None = None
    temperature: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    seed: int | None = None

    @field_validator("structured_output", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        return None if value is None else structured_mode(value)

    def given(self) -> dict[str, Any]:
        """The settings that are set."""
        return self.model_dump(exclude_none=True)

    def over(self, other: JudgeSettings) -> JudgeSettings:
        """These settings, with ``other``'s filling what these leave unset."""
        return JudgeSettings(**{**other.given(), **self.given()})


_ALIASES = {"structured": "structured_output"}


def _settings(query: str, spec: str) -> JudgeSettings:
    values: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        name = _ALIASES.get(key, key)
        if name not in JudgeSettings.model_fields:
            known = ", ".join(sorted(JudgeSettings.model_fields))
            raise ValueError(f"judge spec {spec!r}: unknown setting {key!r}; use {known}")
        values[name] = value
    try:
        return JudgeSettings(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = str(first["loc"][0]) if first["loc"] else "?"
        given = values.get(key)
        raise ValueError(f"judge spec {spec!r}: {key}={given!r}: {first['msg']}") from None


@dataclass(frozen=True)
class BackendKind:
    """A kind of chat backend a spec can name.

    ``prefixes``: what a spec of this kind starts with (``openai:``, ``http://``); the
    target is what follows (a scheme prefix is kept: the target is the URL). ``bare``: the
    bare model names it takes. ``build``: the backend for a spec. ``check``: raises for a
    spec that cannot work (a file that is not there), before any work. ``extra``: the pip
    extra it needs.
    """

    name: str
    prefixes: tuple[str, ...]
    build: Callable[[JudgeSpec], ChatBackend]
    bare: Callable[[str], bool] | None = None
    check: Callable[[JudgeSpec], None] | None = None
    keep_prefix: bool = False
    extra: str | None = None


_kinds: dict[str, BackendKind] = {}
_lock = threading.RLock()
_loaded = False

F = TypeVar("F", bound=Callable[..., ChatBackend])


def backend_kind(
    name: str,
    *,
    prefixes: tuple[str, ...],
    bare: Callable[[str], bool] | None = None,
    check: Callable[[JudgeSpec], None] | None = None,
    keep_prefix: bool = False,
    extra: str | None = None,
) -> Callable[[F], F]:
    """Register the decorated ``build(spec) -> ChatBackend`` as the backend kind ``name``."""

    def register(build: F) -> F:
        kind = BackendKind(name, prefixes, build, bare, check, keep_prefix, extra)
        with _lock:
            _kinds[name] = kind
        return build

    return register


def _load() -> None:
    global _loaded
    with _lock:
        if _loaded:
            return
        _loaded = True
        for module in _BUILT_IN:
            importlib.import_module(module)
        for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
            entry.load()


def kinds() -> dict[str, BackendKind]:
    """Every registered backend kind by name."""
    _load()
    with _lock:
        return dict(_kinds)


def _find(text: str) -> tuple[BackendKind, str] | None:
    """The kind ``text`` names and its target, or None when no kind takes it."""
    known = kinds()
    for kind in known.values():
        for prefix in kind.prefixes:
            if text.startswith(prefix):
                return kind, text if kind.keep_prefix else text[len(prefix) :]
    if ":" in text.split("?", 1)[0]:
        return None
    for kind in known.values():
        if kind.bare is not None and kind.bare(text.split("?", 1)[0]):
            return kind, text
    return None


_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def url_scheme(text: str) -> str | None:
    """The scheme of ``text`` when it is written as a URL (``SCHEME://...``), else None."""
    found = _URL.match(text.strip())
    return found.group(1) if found else None


def is_offline(choice: Any) -> bool:
    """Whether ``choice`` explicitly asks for the offline algorithms."""
    return isinstance(choice, str) and choice.strip().lower() == OFFLINE


def is_spec(text: str) -> bool:
    """Whether ``text`` is a judge spec (``offline`` included) rather than ``module:attr``."""
    text = text.strip()
    return is_offline(text) or url_scheme(text) is not None or _find(text) is not None


class JudgeSpec(BaseModel):
    """A parsed judge spec: the backend kind, its target and its settings."""

    model_config = ConfigDict(frozen=True)

    kind: str
    target: str
    settings: JudgeSettings = Field(default_factory=JudgeSettings)

    @classmethod
    def parse(cls, text: str) -> JudgeSpec:
        """The spec ``text`` is; ``ValueError`` names what is wrong (an unknown prefix, a
        setting that is unknown or out of range, a target the kind cannot use), with any
        secret the spec holds masked."""
        try:
            return cls._parse(text)
        except ValueError as exc:
            raise ValueError(redact(str(exc))) from None

    @classmethod
    def _parse(cls, text: str) -> JudgeSpec:
        text = text.strip()
        if not text:
            raise ValueError("empty judge spec")
        if is_offline(text):
            raise ValueError("'offline' names no judge backend")
        found = _find(text)
        scheme = url_scheme(text)
        if found is None and scheme is not None:
            raise ValueError(
                f"judge spec {text!r}: unsupported URL scheme {scheme!r}; a judge URL is "
                "http://HOST:PORT/v1#MODEL or https://HOST/v1#MODEL"
            )
        if found is None:
            prefixes = ", ".join(p for k in kinds().values() for p in k.prefixes)
            raise ValueError(
                f"judge spec {text!r}: unknown kind; use offline, a bare model name, or a spec "
                f"starting with {prefixes}"
            )
        kind, rest = found
        target, _, query = _split_query(rest)
        if not target:
            raise ValueError(f"judge spec {text!r}: no model named")
        spec = cls(kind=kind.name, target=target, settings=_settings(query, text))
        if kind.check is not None:
            kind.check(spec)
        return spec

    def with_settings(self, settings: JudgeSettings) -> JudgeSpec:
        """This spec with ``settings`` set over its own (None leaves a setting as it is)."""
        return self.model_copy(update={"settings": settings.over(self.settings)})

    def build(self) -> ChatBackend:
        """The backend this spec names."""
        return kinds()[self.kind].build(self)

    @property
    def backend_kind(self) -> BackendKind:
        return kinds()[self.kind]

    def redacted(self) -> str:
        """The spec as text, its secrets (a URL's user-info, a key in its query) masked: how
        it is shown and recorded."""
        return redact(str(self))

    def __str__(self) -> str:
        kind = kinds().get(self.kind)
        head = self.target
        if kind is not None and not kind.keep_prefix and kind.prefixes:
            head = kind.prefixes[0] + self.target
        given = self.settings.given()
        return head + ("?" + urlencode(given) if given else "")


def _split_query(rest: str) -> tuple[str, str, str]:
    """``target?query``; for a URL the settings follow the ``#MODEL`` part."""
    if "#" in rest:
        url, _, model = rest.partition("#")
        model, sep, query = model.partition("?")
        return f"{url}#{model}" if model else "", sep, query
    return rest.partition("?")

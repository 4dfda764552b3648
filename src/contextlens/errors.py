"""Exceptions raised by contextlens. Their messages never hold a secret: each is masked
(:func:`contextlens.redact.redact`) when the error is made."""

from __future__ import annotations

from typing import Any

from contextlens.redact import redact


def described(exc: BaseException) -> str:
    """``TypeName: message`` of an exception, also when its ``__str__`` raises (an error
    class of the user's): its message is then said to be unreadable, and its type kept."""
    try:
        said = str(exc)
    except Exception as inner:  # any failure of the user's __str__
        said = f"(its message could not be read: its __str__ raised {type(inner).__name__})"
    return f"{type(exc).__name__}: {said}"


def user_text(obj: object, read: Any, what: str) -> str:
    """``str(read())`` of a user's object ``obj`` (its model name, say), or a ``TypeError``
    naming ``what`` of which type raised what, when the object's code raises."""
    try:
        return str(read())
    except Exception as exc:  # the user's code may raise anything
        raise TypeError(f"{type(obj).__name__}: {what} raised {described(exc)}") from None


class ContextLensError(Exception):
    """Base class of every error contextlens raises on purpose."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


class InputError(ContextLensError, ValueError):
    """Bad input data; names the file, line and field when they are known."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.file, self.line, self.field = file, line, field
        where = ":".join(str(p) for p in (file, line) if p is not None)
        prefix = f"{where}: " if where else ""
        if field:
            prefix += f"field '{field}': "
        super().__init__(prefix + message)
        self.message = redact(message)


class JudgeError(ContextLensError):
    """A judge call gave no usable reply (transport failure or invalid output after the re-ask)."""

    def __init__(self, message: str, *, raw: str | None = None) -> None:
        super().__init__(message)
        self.raw = None if raw is None else redact(raw)


class MetricComputationError(ContextLensError):
    """A metric could not compute a score for an item (Opik's name for it)."""


class MissingExtraError(ContextLensError, ImportError):
    """An optional backend was asked for but its extra is not installed."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(f"this needs the '{package}' package: pip install 'contextlens[{extra}]'")
